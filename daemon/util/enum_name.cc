#include "daemon/util/enum_name.h"

#include <google/protobuf/descriptor.h>

#include "absl/strings/ascii.h"

namespace cachewatch {
namespace {

// The prefix every value name of `descriptor` starts with: the name of its
// value 0 without "UNSPECIFIED" ("VERDICT_" for VERDICT_UNSPECIFIED).
std::string_view Prefix(const google::protobuf::EnumDescriptor& descriptor) {
  constexpr std::string_view kUnspecified = "UNSPECIFIED";
  const google::protobuf::EnumValueDescriptor* zero =
      descriptor.FindValueByNumber(0);
  if (zero == nullptr) return {};
  std::string_view name = zero->name();
  if (name.ends_with(kUnspecified)) name.remove_suffix(kUnspecified.size());
  return name;
}

}  // namespace

std::string EnumText(const google::protobuf::EnumDescriptor& descriptor,
                     int value, std::string_view unspecified) {
  const google::protobuf::EnumValueDescriptor* named =
      descriptor.FindValueByNumber(value);
  if (value == 0 || named == nullptr) return std::string(unspecified);
  std::string_view name = named->name();
  const std::string_view prefix = Prefix(descriptor);
  if (name.starts_with(prefix)) name.remove_prefix(prefix.size());
  return absl::AsciiStrToLower(std::string(name));
}

std::optional<int> ParseEnumText(
    const google::protobuf::EnumDescriptor& descriptor, std::string_view text) {
  for (int i = 0; i < descriptor.value_count(); ++i) {
    const int number = descriptor.value(i)->number();
    if (number != 0 && EnumText(descriptor, number) == text) return number;
  }
  return std::nullopt;
}

}  // namespace cachewatch
