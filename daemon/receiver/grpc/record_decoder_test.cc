#include "daemon/receiver/grpc/record_decoder.h"

#include <gtest/gtest.h>

#include <string>

#include "cachewatch/v1/service.pb.h"

namespace cachewatch {
namespace {

// The wire bytes of `request` with the first occurrence of `marker` (a
// string field's value) given an invalid UTF-8 byte (0xff) at its end.
std::string WithInvalidUtf8(const v1::RecordRequest& request,
                            const std::string& marker) {
  std::string wire = request.SerializeAsString();
  const size_t at = wire.find(marker);
  EXPECT_NE(at, std::string::npos);
  wire[at + marker.size() - 1] = '\xff';
  return wire;
}

v1::RecordRequest SnapshotRecord() {
  v1::RecordRequest request;
  v1::Snapshot& snapshot = *request.mutable_snapshot();
  snapshot.set_agent("agent-name");
  snapshot.set_session_id("session-id");
  snapshot.set_request_id("request-7");
  for (const char* name : {"tool-a", "tool-b", "tool-c"}) {
    snapshot.add_tools()->set_name(name);
  }
  snapshot.add_message_chain(42);
  snapshot.add_system_sections()->set_name("section-x");
  return request;
}

TEST(RecordDecoderTest, DecodesAValidRecord) {
  v1::RecordRequest decoded;
  ASSERT_TRUE(
      DecodeMessage(SnapshotRecord().SerializeAsString(), decoded).ok());
  EXPECT_EQ(decoded.snapshot().tools(2).name(), "tool-c");
}

TEST(RecordDecoderTest, NamesTheFieldWithInvalidUtf8) {
  const struct {
    const char* marker;
    const char* field;
  } cases[] = {
      {"agent-name", "snapshot.agent: not valid UTF-8"},
      {"tool-c", "snapshot.tools[2].name: not valid UTF-8"},
      {"section-x", "snapshot.system_sections[0].name: not valid UTF-8"},
      {"request-7", "snapshot.request_id: not valid UTF-8"},
  };
  for (const auto& c : cases) {
    v1::RecordRequest decoded;
    absl::Status status =
        DecodeMessage(WithInvalidUtf8(SnapshotRecord(), c.marker), decoded);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.marker;
    EXPECT_EQ(status.message(), c.field);
  }
}

TEST(RecordDecoderTest, NamesUsageFields) {
  v1::RecordRequest request;
  request.mutable_usage()->set_request_id("usage-request");
  request.mutable_usage()
      ->mutable_provider_diagnostics()
      ->set_cache_miss_reason("miss-reason");
  v1::RecordRequest decoded;
  absl::Status status =
      DecodeMessage(WithInvalidUtf8(request, "miss-reason"), decoded);
  EXPECT_EQ(status.message(),
            "usage.provider_diagnostics.cache_miss_reason: not valid UTF-8");
  const RecordIdentity identity =
      PeekRecordIdentity(WithInvalidUtf8(request, "miss-reason"));
  EXPECT_TRUE(identity.is_usage);
  EXPECT_EQ(identity.request_id, "usage-request");
}

TEST(RecordDecoderTest, RefusesBrokenWireFormat) {
  std::string wire = SnapshotRecord().SerializeAsString();
  wire.resize(wire.size() - 3);  // Truncated inside the last field.
  v1::RecordRequest decoded;
  absl::Status status = DecodeMessage(wire, decoded);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("not a valid protobuf message"),
            std::string::npos)
      << status.message();
  EXPECT_EQ(DecodeMessage(std::string("\xff\xff\xff"), decoded).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RecordDecoderTest, DecodesASnapshotRecordAsDecodeMessageDoes) {
  v1::RecordRequest request = SnapshotRecord();
  request.mutable_snapshot()->mutable_cache_control()->add_breakpoints();
  v1::RecordRequest expected;
  ASSERT_TRUE(DecodeMessage(request.SerializeAsString(), expected).ok());
  // Into a message that held another snapshot, as a reused one does.
  v1::Snapshot snapshot;
  snapshot.set_model("left over");
  snapshot.add_tools()->set_name("old-tool");
  snapshot.add_tools()->set_name("old-tool-2");
  for (int i = 0; i < 5; ++i) snapshot.add_tools();
  snapshot.Clear();
  ASSERT_TRUE(DecodeSnapshotRecord(request.SerializeAsString(), snapshot));
  EXPECT_EQ(snapshot.SerializeAsString(),
            expected.snapshot().SerializeAsString());
  EXPECT_EQ(snapshot.tools_size(), 3);
  EXPECT_EQ(snapshot.model(), "");
}

TEST(RecordDecoderTest, LeavesAnyOtherRequestToDecodeMessage) {
  v1::RecordRequest usage;
  usage.mutable_usage()->set_request_id("usage-request");
  const std::string snapshot_wire = SnapshotRecord().SerializeAsString();
  std::string truncated = snapshot_wire;
  truncated.resize(truncated.size() - 3);
  const std::string cases[] = {
      usage.SerializeAsString(),
      v1::RecordRequest().SerializeAsString(),
      // A usage after the snapshot: the request is the usage.
      snapshot_wire + usage.SerializeAsString(),
      // Two snapshots: protobuf merges them.
      snapshot_wire + snapshot_wire,
      truncated,
      WithInvalidUtf8(SnapshotRecord(), "tool-b"),
  };
  for (const std::string& wire : cases) {
    v1::Snapshot snapshot;
    EXPECT_FALSE(DecodeSnapshotRecord(wire, snapshot)) << wire.size();
  }
}

TEST(RecordDecoderTest, PeeksTheRequestIdOfASnapshot) {
  const RecordIdentity identity =
      PeekRecordIdentity(WithInvalidUtf8(SnapshotRecord(), "tool-b"));
  EXPECT_FALSE(identity.is_usage);
  EXPECT_EQ(identity.request_id, "request-7");
  EXPECT_EQ(PeekRecordIdentity(WithInvalidUtf8(SnapshotRecord(), "request-7"))
                .request_id,
            "");
}

}  // namespace
}  // namespace cachewatch
