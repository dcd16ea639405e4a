#include "daemon/store/columns.h"

// For XXH3_state_t on the stack (streaming without an allocation).
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/core/classifier.h"
#include "daemon/util/status_macros.h"

namespace cachewatch {
namespace {

using nlohmann::ordered_json;

// The 16 lowercase hex digits of `value` (printf's "%016x") appended to
// `out`, without the format parser (absl::StrFormat was ~1 % of a Record
// stream's samples: every snapshot's hashes).
void AppendHex64(uint64_t value, std::string& out) {
  static constexpr char kDigits[] = "0123456789abcdef";
  char text[16];
  for (int i = 15; i >= 0; --i) {
    text[i] = kDigits[value & 0xf];
    value >>= 4;
  }
  out.append(text, sizeof(text));
}

void AppendLittleEndian(uint64_t value, int bytes, std::string& out) {
  for (int i = 0; i < bytes; ++i) {
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  }
}

// DataLoss naming the column and the text the store could not have written.
absl::Status Malformed(std::string_view what, std::string_view text) {
  return absl::DataLossError(absl::StrFormat(
      "malformed %s column: %s", std::string(what), std::string(text)));
}

absl::StatusOr<ordered_json> ParseArray(std::string_view what,
                                        std::string_view text) {
  ordered_json json = ordered_json::parse(text, nullptr,
                                          /*allow_exceptions=*/false);
  if (!json.is_array()) return Malformed(what, text);
  return json;
}

// The string member `name` of `object`, or null when absent or not a string.
const std::string* StringMember(const ordered_json& object, const char* name) {
  auto it = object.find(name);
  if (it == object.end() || !it->is_string()) return nullptr;
  return it->get_ptr<const std::string*>();
}

std::optional<uint32_t> Uint32Member(const ordered_json& object,
                                     const char* name) {
  auto it = object.find(name);
  if (it == object.end() || !it->is_number_unsigned()) return std::nullopt;
  const uint64_t value = it->get<uint64_t>();
  if (value > UINT32_MAX) return std::nullopt;
  return static_cast<uint32_t>(value);
}

// Appends `text` as a JSON string, as ordered_json::dump() writes it: as it
// is when nothing in it needs escaping (the usual section name), else
// through nlohmann's serializer.
void AppendJsonString(std::string_view text, std::string& out) {
  const bool plain = std::none_of(text.begin(), text.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == '"' || c == '\\';
  });
  if (plain) {
    out.push_back('"');
    out.append(text);
    out.push_back('"');
  } else {
    out += ordered_json(std::string(text)).dump();
  }
}

}  // namespace

std::string Hex64(uint64_t value) {
  std::string text;
  AppendHex64(value, text);
  return text;
}

std::optional<uint64_t> ParseHex64(std::string_view text) {
  if (text.size() != 16) return std::nullopt;
  for (char c : text) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) {
      return std::nullopt;
    }
  }
  uint64_t value = 0;
  auto [end, error] =
      std::from_chars(text.data(), text.data() + text.size(), value, 16);
  if (error != std::errc() || end != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

std::string ToolListHash(
    const google::protobuf::RepeatedPtrField<v1::ToolRef>& tools) {
  // The list's bytes gathered in a buffer on the stack and fed to XXH3's
  // streaming state a buffer at a time: neither joined into one string (its
  // growth was ~2 % of a Record stream's samples) nor fed three small
  // updates per tool (their copies into the state were ~2 %); the same hash.
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  unsigned char buffer[4096];
  size_t used = 0;
  auto append = [&](const void* bytes, size_t size) {
    if (used + size > sizeof(buffer)) {
      XXH3_64bits_update(&state, buffer, used);
      used = 0;
      if (size > sizeof(buffer)) {
        XXH3_64bits_update(&state, bytes, size);
        return;
      }
    }
    std::memcpy(buffer + used, bytes, size);
    used += size;
  };
  auto append_little_endian = [&](uint64_t value, int bytes) {
    unsigned char out[8];
    for (int i = 0; i < bytes; ++i) out[i] = (value >> (8 * i)) & 0xff;
    append(out, static_cast<size_t>(bytes));
  };
  for (const v1::ToolRef& tool : tools) {
    append_little_endian(tool.name().size(), 4);
    append(tool.name().data(), tool.name().size());
    append_little_endian(tool.schema_hash(), 8);
  }
  XXH3_64bits_update(&state, buffer, used);
  return Hex64(XXH3_64bits_digest(&state));
}

std::string ToolListHashOf(const SnapshotWrite& write) {
  return write.tool_list_hash.empty() ? ToolListHash(write.snapshot->tools())
                                      : write.tool_list_hash;
}

std::string SectionsJson(
    const google::protobuf::RepeatedPtrField<v1::SystemSection>& sections) {
  if (sections.empty()) return {};
  // Written directly, not through an ordered_json (its nodes were 3.8 % of
  // a Record stream's samples); the same text.
  std::string json = "[";
  for (const v1::SystemSection& section : sections) {
    if (json.size() > 1) json.push_back(',');
    json += "{\"name\":";
    AppendJsonString(section.name(), json);
    json += ",\"hash\":\"";
    AppendHex64(section.hash(), json);
    json += "\"}";
  }
  json.push_back(']');
  return json;
}

absl::Status ParseSectionsJson(
    std::string_view json,
    google::protobuf::RepeatedPtrField<v1::SystemSection>* sections) {
  CACHEWATCH_ASSIGN_OR_RETURN(ordered_json array,
                              ParseArray("system_sections", json));
  for (const ordered_json& item : array) {
    const std::string* name = StringMember(item, "name");
    const std::string* hash_text = StringMember(item, "hash");
    const std::optional<uint64_t> hash =
        hash_text != nullptr ? ParseHex64(*hash_text) : std::nullopt;
    if (name == nullptr || !hash.has_value()) {
      return Malformed("system_sections", json);
    }
    v1::SystemSection* section = sections->Add();
    section->set_name(*name);
    section->set_hash(*hash);
  }
  return absl::OkStatus();
}

std::string BreakpointsJson(
    const google::protobuf::RepeatedPtrField<v1::Breakpoint>& breakpoints) {
  if (breakpoints.empty()) return {};
  std::string json = "[";
  for (const v1::Breakpoint& breakpoint : breakpoints) {
    if (json.size() > 1) json.push_back(',');
    json += "{\"segment\":";
    AppendJsonString(EnumText(breakpoint.segment()), json);
    absl::StrAppend(&json, ",\"index\":", breakpoint.index(),
                    ",\"ttl_seconds\":", breakpoint.ttl_seconds());
    // Where the breakpoint is in its segment: the classifier needs it to
    // diff this turn as the next turn's previous one after a restart.
    if (breakpoint.has_blocks_after()) {
      absl::StrAppend(&json, ",\"blocks_after\":", breakpoint.blocks_after());
    }
    json.push_back('}');
  }
  json.push_back(']');
  return json;
}

absl::Status ParseBreakpointsJson(
    std::string_view json,
    google::protobuf::RepeatedPtrField<v1::Breakpoint>* breakpoints) {
  CACHEWATCH_ASSIGN_OR_RETURN(ordered_json array,
                              ParseArray("breakpoints", json));
  for (const ordered_json& item : array) {
    const std::string* segment_text = StringMember(item, "segment");
    std::optional<v1::PromptSegment> segment;
    if (segment_text != nullptr) {
      segment = segment_text->empty()
                    ? v1::PROMPT_SEGMENT_UNSPECIFIED
                    : ParseEnumText<v1::PromptSegment>(*segment_text);
    }
    const std::optional<uint32_t> index = Uint32Member(item, "index");
    const std::optional<uint32_t> ttl = Uint32Member(item, "ttl_seconds");
    // Absent in rows written before it was stored, and when not sent.
    const bool has_blocks_after = item.contains("blocks_after");
    const std::optional<uint32_t> blocks_after =
        Uint32Member(item, "blocks_after");
    if (!segment.has_value() || !index.has_value() || !ttl.has_value() ||
        (has_blocks_after && !blocks_after.has_value())) {
      return Malformed("breakpoints", json);
    }
    v1::Breakpoint* breakpoint = breakpoints->Add();
    breakpoint->set_segment(*segment);
    breakpoint->set_index(*index);
    breakpoint->set_ttl_seconds(*ttl);
    if (blocks_after.has_value()) breakpoint->set_blocks_after(*blocks_after);
  }
  return absl::OkStatus();
}

std::string NamesJson(
    const google::protobuf::RepeatedPtrField<std::string>& names) {
  ordered_json json = ordered_json::array();
  for (const std::string& name : names) json.push_back(name);
  return json.dump();
}

std::string ReasonsJson(const google::protobuf::RepeatedField<int>& reasons) {
  ordered_json json = ordered_json::array();
  for (int reason : reasons) {
    json.push_back(ReasonName(static_cast<v1::Reason>(reason)));
  }
  return json.dump();
}

std::string ChainBlob(const google::protobuf::RepeatedField<uint64_t>& chain) {
  std::string blob;
  blob.reserve(chain.size() * 8);
  for (uint64_t hash : chain) AppendLittleEndian(hash, 8, blob);
  return blob;
}

absl::Status ParseChainBlob(std::string_view blob,
                            google::protobuf::RepeatedField<uint64_t>* chain) {
  if (blob.size() % 8 != 0) {
    return absl::DataLossError(absl::StrFormat(
        "malformed message_chain column: %d bytes", blob.size()));
  }
  chain->Reserve(static_cast<int>(blob.size() / 8));
  for (size_t offset = 0; offset < blob.size(); offset += 8) {
    uint64_t hash = 0;
    for (int i = 0; i < 8; ++i) {
      hash |=
          static_cast<uint64_t>(static_cast<unsigned char>(blob[offset + i]))
          << (8 * i);
    }
    chain->Add(hash);
  }
  return absl::OkStatus();
}

}  // namespace cachewatch
