// One way to name enum values: a constexpr table of (value, name) pairs per
// enum, read both ways. Used for metric labels, stored columns, CLI output
// and configuration values alike.
//
//   constexpr EnumNames<Color, 2> kColorNames = {{
//       {Color::kRed, "red"}, {Color::kBlue, "blue"}}};
//   EnumName(kColorNames, Color::kRed)        // "red"
//   EnumFromName(kColorNames, "blue")         // Color::kBlue
//
// Pure functions of constant tables; thread-safe.
#ifndef CACHEWATCH_DAEMON_UTIL_ENUM_NAME_H_
#define CACHEWATCH_DAEMON_UTIL_ENUM_NAME_H_

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>

namespace cachewatch {

template <typename Enum, size_t N>
using EnumNames = std::array<std::pair<Enum, std::string_view>, N>;

// The name of `value`, or `fallback` when the table has none.
template <typename Enum, size_t N>
constexpr std::string_view EnumName(const EnumNames<Enum, N>& names, Enum value,
                                    std::string_view fallback = "unknown") {
  for (const auto& [entry, name] : names) {
    if (entry == value) return name;
  }
  return fallback;
}

// The value named `name`, or nullopt.
template <typename Enum, size_t N>
constexpr std::optional<Enum> EnumFromName(const EnumNames<Enum, N>& names,
                                           std::string_view name) {
  for (const auto& [entry, entry_name] : names) {
    if (entry_name == name) return entry;
  }
  return std::nullopt;
}

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_UTIL_ENUM_NAME_H_
