// One way to name enum values, read both ways, for metric labels, stored
// columns, CLI output and configuration values alike.
//
// A proto enum's value is named from its descriptor: lower case, without the
// type's prefix (the name of value 0 up to "UNSPECIFIED"):
//   EnumText(v1::VERDICT_COLD_START)              // "cold_start"
//   ParseEnumText<v1::Verdict>("cold_start")      // v1::VERDICT_COLD_START
// Value 0 (unspecified) and values the descriptor does not know have no
// name: `unspecified` (default "") is returned for them.
//
// Any other enum names its values in a constexpr table of (value, name)
// pairs:
//   constexpr EnumNames<Color, 2> kColorNames = {{
//       {Color::kRed, "red"}, {Color::kBlue, "blue"}}};
//   EnumName(kColorNames, Color::kRed)        // "red"
//   EnumFromName(kColorNames, "blue")         // Color::kBlue
//
// Pure functions of constant tables; thread-safe.
#ifndef CACHEWATCH_DAEMON_UTIL_ENUM_NAME_H_
#define CACHEWATCH_DAEMON_UTIL_ENUM_NAME_H_

#include <google/protobuf/generated_enum_reflection.h>

#include <array>
#include <cstddef>
#include <optional>
#include <string>
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

std::string EnumText(const google::protobuf::EnumDescriptor& descriptor,
                     int value, std::string_view unspecified = "");
// The value whose EnumText is `text` (never 0), else nullopt.
std::optional<int> ParseEnumText(
    const google::protobuf::EnumDescriptor& descriptor, std::string_view text);

template <typename Enum>
std::string EnumText(Enum value, std::string_view unspecified = "") {
  return EnumText(*google::protobuf::GetEnumDescriptor<Enum>(),
                  static_cast<int>(value), unspecified);
}

template <typename Enum>
std::optional<Enum> ParseEnumText(std::string_view text) {
  const std::optional<int> value =
      ParseEnumText(*google::protobuf::GetEnumDescriptor<Enum>(), text);
  if (!value.has_value()) return std::nullopt;
  return static_cast<Enum>(*value);
}

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_UTIL_ENUM_NAME_H_
