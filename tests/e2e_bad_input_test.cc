// Bad input end to end, over real gRPC with raw bytes on the wire: a record
// that does not decode (invalid UTF-8 in a string field) or breaks a bound is
// refused alone with INVALID_ARGUMENT naming the field; the stream it came on
// goes on and nothing else is lost.
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/client_unary_call.h>
#include <grpcpp/support/sync_stream.h>
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cachewatch/v1/service.grpc.pb.h"
#include "tests/support/daemon_process.h"
#include "tests/support/stored_rows.h"
#include "tests/support/turn_records.h"

namespace cachewatch {
namespace {

using testing::DaemonProcess;
using testing::StoredRowSet;
using testing::TempDir;
using testing::TurnSnapshot;
using testing::TurnUsage;

constexpr char kAgent[] = "bad-input";

grpc::ByteBuffer Bytes(const std::string& wire) {
  grpc::Slice slice(wire);
  return grpc::ByteBuffer(&slice, 1);
}

std::string Flatten(const grpc::ByteBuffer& buffer) {
  grpc::Slice slice;
  EXPECT_TRUE(buffer.DumpToSingleSlice(&slice).ok());
  return std::string(reinterpret_cast<const char*>(slice.begin()),
                     slice.size());
}

// `message` serialized, with the last byte of the first occurrence of
// `marker` (a string field's value) replaced by 0xff: invalid UTF-8.
std::string WithInvalidUtf8(const google::protobuf::Message& message,
                            const std::string& marker) {
  std::string wire = message.SerializeAsString();
  const size_t at = wire.find(marker);
  EXPECT_NE(at, std::string::npos) << marker;
  if (at != std::string::npos) wire[at + marker.size() - 1] = '\xff';
  return wire;
}

// Calls a unary method with raw request bytes; the reply is parsed into
// `response` when OK.
grpc::Status RawUnary(const std::shared_ptr<grpc::Channel>& channel,
                      const std::string& method, const std::string& request,
                      google::protobuf::Message* response) {
  grpc::ClientContext context;
  grpc::ByteBuffer reply;
  grpc::Status status =
      grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
          channel.get(),
          grpc::internal::RpcMethod(method.c_str(),
                                    grpc::internal::RpcMethod::NORMAL_RPC),
          &context, Bytes(request), &reply);
  if (status.ok()) {
    EXPECT_TRUE(response->ParseFromString(Flatten(reply)));
  }
  return status;
}

// A Record stream that sends raw bytes.
class RawRecordStream {
 public:
  explicit RawRecordStream(const std::shared_ptr<grpc::Channel>& channel)
      : method_("/cachewatch.v1.CacheWatch/Record",
                grpc::internal::RpcMethod::BIDI_STREAMING),
        stream_(grpc::internal::ClientReaderWriterFactory<
                grpc::ByteBuffer, grpc::ByteBuffer>::Create(channel.get(),
                                                            method_,
                                                            &context_)) {}
  bool Send(const std::string& wire) { return stream_->Write(Bytes(wire)); }
  // Half-closes, reads every ack and returns the final status.
  grpc::Status Close(std::vector<v1::RecordAck>* acks) {
    stream_->WritesDone();
    for (grpc::ByteBuffer reply; stream_->Read(&reply);) {
      acks->emplace_back();
      EXPECT_TRUE(acks->back().ParseFromString(Flatten(reply)));
    }
    return stream_->Finish();
  }

 private:
  grpc::ClientContext context_;
  grpc::internal::RpcMethod method_;
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>>
      stream_;
};

std::string SnapshotRecord(const v1::Snapshot& snapshot) {
  v1::RecordRequest request;
  *request.mutable_snapshot() = snapshot;
  return request.SerializeAsString();
}

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = dir_.File("cachewatch.db");
    ASSERT_TRUE(daemon_.Start(db_));
    channel_ = grpc::CreateChannel(daemon_.grpc_address(),
                                   grpc::InsecureChannelCredentials());
  }
  void TearDown() override {
    if (HasFailure()) ADD_FAILURE() << "daemon log:\n" << daemon_.Logs();
  }
  std::set<std::string> StoredSnapshots() {
    return StoredRowSet(
        db_, "SELECT request_id FROM turns WHERE snapshot_received = 1");
  }

  TempDir dir_;
  std::string db_;
  DaemonProcess daemon_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(BadInputTest, UndecodableRecordIsRefusedAloneAndTheStreamGoesOn) {
  RawRecordStream stream(channel_);
  v1::Snapshot bad = TurnSnapshot(kAgent, "s", 1);
  bad.mutable_tools(1)->set_name("Rea#");
  v1::RecordRequest bad_request;
  *bad_request.mutable_snapshot() = bad;
  v1::RecordRequest bad_usage;
  *bad_usage.mutable_usage() = TurnUsage(kAgent, "s", 0);
  bad_usage.mutable_usage()->set_model("mod#");
  ASSERT_TRUE(stream.Send(SnapshotRecord(TurnSnapshot(kAgent, "s", 0))));
  ASSERT_TRUE(stream.Send(WithInvalidUtf8(bad_request, "Rea#")));
  ASSERT_TRUE(stream.Send(WithInvalidUtf8(bad_usage, "mod#")));
  ASSERT_TRUE(stream.Send(std::string("\x0a\xff\xff\xff\x0f", 5)));
  ASSERT_TRUE(stream.Send(SnapshotRecord(TurnSnapshot(kAgent, "s", 2))));
  std::vector<v1::RecordAck> acks;
  const grpc::Status status = stream.Close(&acks);
  EXPECT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(acks.size(), 5u);
  EXPECT_EQ(acks[0].code(), grpc::StatusCode::OK);
  EXPECT_EQ(acks[1].code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(acks[1].request_id(), "s-1");
  EXPECT_FALSE(acks[1].is_usage());
  EXPECT_EQ(acks[1].message(), "snapshot.tools[1].name: not valid UTF-8");
  EXPECT_EQ(acks[2].code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(acks[2].request_id(), "s-0");
  EXPECT_TRUE(acks[2].is_usage());
  EXPECT_EQ(acks[2].message(), "usage.model: not valid UTF-8");
  EXPECT_EQ(acks[3].code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(acks[3].message().find("not a valid protobuf message"),
            std::string::npos)
      << acks[3].message();
  EXPECT_EQ(acks[4].code(), grpc::StatusCode::OK);
  EXPECT_EQ(acks[4].request_id(), "s-2");
  EXPECT_EQ(StoredSnapshots(), (std::set<std::string>{"s-0", "s-2"}));
}

TEST_F(BadInputTest, UndecodableUnaryRequestIsInvalidArgumentNamingTheField) {
  v1::RecordSnapshotRequest snapshot;
  *snapshot.mutable_snapshot() = TurnSnapshot(kAgent, "u", 0);
  snapshot.mutable_snapshot()->add_system_sections()->set_name("dat#");
  v1::RecordSnapshotResponse snapshot_response;
  grpc::Status status =
      RawUnary(channel_, "/cachewatch.v1.CacheWatch/RecordSnapshot",
               WithInvalidUtf8(snapshot, "dat#"), &snapshot_response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "snapshot.system_sections[0].name: not valid UTF-8");

  v1::RecordUsageRequest usage;
  *usage.mutable_usage() = TurnUsage(kAgent, "u", 0);
  usage.mutable_usage()->set_session_id("u#");
  v1::RecordUsageResponse usage_response;
  status = RawUnary(channel_, "/cachewatch.v1.CacheWatch/RecordUsage",
                    WithInvalidUtf8(usage, "u#"), &usage_response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(), "usage.session_id: not valid UTF-8");

  // Valid bytes still go through the raw path.
  snapshot.mutable_snapshot()->clear_system_sections();
  status = RawUnary(channel_, "/cachewatch.v1.CacheWatch/RecordSnapshot",
                    snapshot.SerializeAsString(), &snapshot_response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(StoredSnapshots(), (std::set<std::string>{"u-0"}));
  const std::string metrics =
      testing::HttpGet(daemon_.metrics_address(), "/metrics");
  EXPECT_EQ(testing::MetricValue(metrics,
                                 {"cachewatch_ingest_records_total{",
                                  "kind=\"snapshot\"", "outcome=\"invalid\""}),
            1);
  EXPECT_EQ(
      testing::MetricValue(metrics, {"cachewatch_ingest_records_total{",
                                     "kind=\"usage\"", "outcome=\"invalid\""}),
      1);
}

}  // namespace
}  // namespace cachewatch
