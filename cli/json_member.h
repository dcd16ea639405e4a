// Reading members of a parsed transcript line without exceptions: what the
// transcript readers (claude_code_, codex_, gemini_transcript) share.
// Pure functions; thread-safe.
#ifndef CACHEWATCH_CLI_JSON_MEMBER_H_
#define CACHEWATCH_CLI_JSON_MEMBER_H_

#include <string>

#include "nlohmann/json.hpp"

namespace cachewatch::cli {

// The member `name` of `object`; nullptr when `object` is not an object or
// has no such member.
const nlohmann::json* Member(const nlohmann::json& object, const char* name);

// The member `name` of `object` when it is a string, else "".
std::string StringMember(const nlohmann::json& object, const char* name);

}  // namespace cachewatch::cli

#endif  // CACHEWATCH_CLI_JSON_MEMBER_H_
