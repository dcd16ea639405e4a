#include "daemon/core/snapshot_interner.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

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

void SnapshotInterner::Sweep() {
  std::erase_if(parts_,
                [](const auto& entry) { return entry.second.expired(); });
}

}  // namespace cachewatch
