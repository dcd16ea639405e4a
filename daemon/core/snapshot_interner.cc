#include "daemon/core/snapshot_interner.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <utility>

namespace cachewatch {
namespace {

v1::Snapshot SharedPart(const v1::Snapshot& snapshot) {
  v1::Snapshot part;
  part.set_provider(snapshot.provider());
  part.set_model(snapshot.model());
  part.set_system_hash(snapshot.system_hash());
  *part.mutable_system_sections() = snapshot.system_sections();
  if (snapshot.has_cache_control()) {
    *part.mutable_cache_control() = snapshot.cache_control();
  }
  part.set_options_hash(snapshot.options_hash());
  part.set_expected_drop(snapshot.expected_drop());
  part.set_tool_order_policy(snapshot.tool_order_policy());
  return part;
}

bool SameSections(const v1::SystemSection& a, const v1::SystemSection& b) {
  return a.hash() == b.hash() && a.name() == b.name();
}

bool SameBreakpoints(const v1::Breakpoint& a, const v1::Breakpoint& b) {
  return a.segment() == b.segment() && a.index() == b.index() &&
         a.ttl_seconds() == b.ttl_seconds() &&
         a.has_blocks_after() == b.has_blocks_after() &&
         a.blocks_after() == b.blocks_after();
}

bool SameCacheControl(const v1::CacheControl& a, const v1::CacheControl& b) {
  return a.enabled() == b.enabled() && a.automatic() == b.automatic() &&
         a.ttl_seconds() == b.ttl_seconds() &&
         std::equal(a.breakpoints().begin(), a.breakpoints().end(),
                    b.breakpoints().begin(), b.breakpoints().end(),
                    SameBreakpoints);
}

// Whether SharedPart(a) and SharedPart(b) are equal, without building them.
bool SameSharedPart(const v1::Snapshot& a, const v1::Snapshot& b) {
  return a.provider() == b.provider() && a.system_hash() == b.system_hash() &&
         a.options_hash() == b.options_hash() &&
         a.expected_drop() == b.expected_drop() &&
         a.tool_order_policy() == b.tool_order_policy() &&
         a.model() == b.model() &&
         std::equal(a.system_sections().begin(), a.system_sections().end(),
                    b.system_sections().begin(), b.system_sections().end(),
                    SameSections) &&
         a.has_cache_control() == b.has_cache_control() &&
         SameCacheControl(a.cache_control(), b.cache_control());
}

std::string DeterministicBytes(const v1::Snapshot& part) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    part.SerializeToCodedStream(&coded);
  }
  return bytes;
}

}  // namespace

std::shared_ptr<const v1::Snapshot> SnapshotInterner::Intern(
    const v1::Snapshot& snapshot) {
  v1::Snapshot part = SharedPart(snapshot);
  std::weak_ptr<const v1::Snapshot>& slot = parts_[DeterministicBytes(part)];
  if (std::shared_ptr<const v1::Snapshot> shared = slot.lock()) return shared;
  auto shared = std::make_shared<const v1::Snapshot>(std::move(part));
  slot = shared;
  return shared;
}

std::shared_ptr<const v1::Snapshot> SnapshotInterner::Intern(
    const v1::Snapshot& snapshot,
    const std::shared_ptr<const v1::Snapshot>& known) {
  // What Intern(snapshot) would return: `known` is alive, so it is the copy
  // its slot holds for its content.
  if (known != nullptr && SameSharedPart(*known, snapshot)) return known;
  return Intern(snapshot);
}

void SnapshotInterner::Sweep() {
  std::erase_if(parts_,
                [](const auto& entry) { return entry.second.expired(); });
}

}  // namespace cachewatch
