#include "cli/json_member.h"

namespace cachewatch::cli {

const nlohmann::json* Member(const nlohmann::json& object, const char* name) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(name);
  return it == object.end() ? nullptr : &*it;
}

std::string StringMember(const nlohmann::json& object, const char* name) {
  const nlohmann::json* value = Member(object, name);
  return value != nullptr && value->is_string() ? value->get<std::string>()
                                                : std::string();
}

}  // namespace cachewatch::cli
