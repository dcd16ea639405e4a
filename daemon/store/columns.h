// How values are laid out in the store's columns. The layouts are part of
// the schema's public contract (postmortem SQL reads them):
//   - 64-bit hashes: 16 lower-case hex digits;
//   - enums: the value's name, lower-case, without the enum's prefix
//     ("cold_start" for VERDICT_COLD_START; providers as ProviderName(),
//     reasons as ReasonName()); the unspecified value is NULL;
//   - system sections: JSON [{"name": ..., "hash": "<hex>"}, ...];
//   - breakpoints: JSON [{"segment": "tools|system|messages", "index": N,
//     "ttl_seconds": N}, ...];
//   - name lists: JSON arrays of strings;
//   - the message chain: 8 bytes little-endian per block.
//
// Pure functions; thread-safe. Parsers return DataLoss for text the store
// could not have written.
#ifndef CACHEWATCH_DAEMON_STORE_COLUMNS_H_
#define CACHEWATCH_DAEMON_STORE_COLUMNS_H_

#include <google/protobuf/generated_enum_reflection.h>
#include <google/protobuf/repeated_field.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cachewatch/v1/break.pb.h"
#include "cachewatch/v1/snapshot.pb.h"
#include "daemon/core/turn.h"
#include "daemon/store/record.h"
#include "daemon/util/enum_name.h"

namespace cachewatch {

// The lane column of a lane key: "main" when the key's lane is empty.
inline std::string_view LaneColumn(const LaneKey& key) {
  return key.lane.empty() ? std::string_view("main") : key.lane;
}

std::string Hex64(uint64_t value);
// Exactly 16 hex digits, else nullopt.
std::optional<uint64_t> ParseHex64(std::string_view text);

// The content address of a tool list: Hex64 of XXH3-64 over, for each tool
// in order, its name's length (4 bytes little-endian), its name and its
// schema hash (8 bytes little-endian).
std::string ToolListHash(
    const google::protobuf::RepeatedPtrField<v1::ToolRef>& tools);
// The hash of a snapshot write's list: the one it carries, else
// ToolListHash of its snapshot's tools.
std::string ToolListHashOf(const SnapshotWrite& write);

// The column text of an enum value (see the header comment) is
// EnumText(value) of daemon/util/enum_name.h; NULL for the unspecified value.

// Empty when there are no sections (stored as NULL).
std::string SectionsJson(
    const google::protobuf::RepeatedPtrField<v1::SystemSection>& sections);
absl::Status ParseSectionsJson(
    std::string_view json,
    google::protobuf::RepeatedPtrField<v1::SystemSection>* sections);

// Empty when there are no breakpoints (stored as NULL).
std::string BreakpointsJson(
    const google::protobuf::RepeatedPtrField<v1::Breakpoint>& breakpoints);
absl::Status ParseBreakpointsJson(
    std::string_view json,
    google::protobuf::RepeatedPtrField<v1::Breakpoint>* breakpoints);

std::string NamesJson(
    const google::protobuf::RepeatedPtrField<std::string>& names);
std::string ReasonsJson(const google::protobuf::RepeatedField<int>& reasons);

std::string ChainBlob(const google::protobuf::RepeatedField<uint64_t>& chain);
absl::Status ParseChainBlob(std::string_view blob,
                            google::protobuf::RepeatedField<uint64_t>* chain);

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_STORE_COLUMNS_H_
