// Bad input end to end, over real gRPC with raw bytes on the wire: a record
// that does not decode (invalid UTF-8 in a string field) or breaks a bound is
// refused alone with INVALID_ARGUMENT naming the field; the stream it came on
// goes on and nothing else is lost.
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/client_unary_call.h>
#include <grpcpp/support/sync_stream.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
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

// One bad record: how it is made from a valid one, and the start of the
// refusal's message (the field's path and the problem).
struct BadRecord {
  const char* expected;
  std::function<void(v1::RecordRequest&)> spoil;
};

std::vector<BadRecord> BadSnapshots() {
  using S = v1::Snapshot;
  auto on = [](std::function<void(S&)> f) {
    return [f](v1::RecordRequest& r) { f(*r.mutable_snapshot()); };
  };
  const std::string name129(129, 'a'), id257(257, 'i');
  return {
      {"snapshot.agent: required", on([](S& s) { s.clear_agent(); })},
      {"snapshot.agent: longer than 128 bytes",
       on([=](S& s) { s.set_agent(name129); })},
      {"snapshot.session_id: required", on([](S& s) { s.clear_session_id(); })},
      {"snapshot.session_id: longer than 256 bytes",
       on([=](S& s) { s.set_session_id(id257); })},
      {"snapshot.lane: longer than 128 bytes",
       on([=](S& s) { s.set_lane(name129); })},
      {"snapshot.request_id: required", on([](S& s) { s.clear_request_id(); })},
      {"snapshot.request_id: longer than 256 bytes",
       on([=](S& s) { s.set_request_id(id257); })},
      {"snapshot.request_time: required",
       on([](S& s) { s.clear_request_time(); })},
      {"snapshot.request_time: out of range",
       on([](S& s) { s.mutable_request_time()->set_nanos(-1); })},
      {"snapshot.request_time: 2019-",
       on([](S& s) { s.mutable_request_time()->set_seconds(1'546'300'800); })},
      {"snapshot.request_time: ", on([](S& s) {
         s.mutable_request_time()->set_seconds(s.request_time().seconds() +
                                               3 * 86400);
       })},
      {"snapshot.provider: required",
       on([](S& s) { s.set_provider(v1::PROVIDER_UNSPECIFIED); })},
      {"snapshot.provider: required",
       on([](S& s) { s.set_provider(static_cast<v1::Provider>(99)); })},
      {"snapshot.model: required", on([](S& s) { s.clear_model(); })},
      {"snapshot.model: longer than 128 bytes",
       on([=](S& s) { s.set_model(name129); })},
      {"snapshot.tools: 2001 tools, more than 2000", on([](S& s) {
         for (int i = 0; i < 1998; ++i) {
           s.add_tools()->set_name("t" + std::to_string(i));
         }
       })},
      {"snapshot.tools[1].name: required",
       on([](S& s) { s.mutable_tools(1)->clear_name(); })},
      {"snapshot.tools[2].name: longer than 256 bytes",
       on([=](S& s) { s.mutable_tools(2)->set_name(id257); })},
      {"snapshot.system_sections: more than 256", on([](S& s) {
         for (int i = 0; i < 257; ++i) s.add_system_sections()->set_name("x");
       })},
      {"snapshot.system_sections[0].name: required",
       on([](S& s) { s.add_system_sections(); })},
      {"snapshot.system_sections[0].name: longer than 128 bytes",
       on([=](S& s) { s.add_system_sections()->set_name(name129); })},
      {"snapshot.message_chain: 100001 blocks, more than 100000", on([](S& s) {
         for (int i = 0; i < 100001; ++i) s.add_message_chain(i);
       })},
      {"snapshot.expected_drop: unknown value",
       on([](S& s) { s.set_expected_drop(static_cast<v1::ExpectedDrop>(9)); })},
      {"snapshot.tool_order_policy: unknown value", on([](S& s) {
         s.set_tool_order_policy(static_cast<v1::ToolOrderPolicy>(9));
       })},
      {"snapshot.cache_control.ttl_seconds: 604801 s is more than 604800",
       on([](S& s) { s.mutable_cache_control()->set_ttl_seconds(604801); })},
      {"snapshot.cache_control.breakpoints: more than 64", on([](S& s) {
         for (int i = 0; i < 65; ++i) {
           s.mutable_cache_control()->add_breakpoints()->set_segment(
               v1::PROMPT_SEGMENT_TOOLS);
         }
       })},
      {"snapshot.cache_control.breakpoints[0].segment: required",
       on([](S& s) { s.mutable_cache_control()->add_breakpoints(); })},
      {"snapshot.cache_control.breakpoints[0].ttl_seconds: 700000 s",
       on([](S& s) {
         v1::Breakpoint* b = s.mutable_cache_control()->add_breakpoints();
         b->set_segment(v1::PROMPT_SEGMENT_TOOLS);
         b->set_ttl_seconds(700000);
       })},
      {"snapshot.cache_control.breakpoints[0].index: 100000 is not below "
       "100000",
       on([](S& s) {
         v1::Breakpoint* b = s.mutable_cache_control()->add_breakpoints();
         b->set_segment(v1::PROMPT_SEGMENT_SYSTEM);
         b->set_index(100000);
       })},
      {"snapshot.cache_control.breakpoints[0].blocks_after: 100000 is not "
       "below 100000",
       on([](S& s) {
         v1::Breakpoint* b = s.mutable_cache_control()->add_breakpoints();
         b->set_segment(v1::PROMPT_SEGMENT_TOOLS);
         b->set_blocks_after(100000);
       })},
      {"snapshot.cache_control.breakpoints[0].index: 5 is past the message "
       "chain's 2 blocks",
       on([](S& s) {
         s.add_message_chain(1);
         s.add_message_chain(2);
         v1::Breakpoint* b = s.mutable_cache_control()->add_breakpoints();
         b->set_segment(v1::PROMPT_SEGMENT_MESSAGES);
         b->set_index(5);
       })},
  };
}

std::vector<BadRecord> BadUsages() {
  using U = v1::Usage;
  auto on = [](std::function<void(U&)> f) {
    return [f](v1::RecordRequest& r) {
      *r.mutable_usage() = TurnUsage(kAgent, "matrix", 0);
      f(*r.mutable_usage());
    };
  };
  const std::string name129(129, 'a'), id257(257, 'i');
  return {
      {"usage.agent: required", on([](U& u) { u.clear_agent(); })},
      {"usage.agent: longer than 128 bytes",
       on([=](U& u) { u.set_agent(name129); })},
      {"usage.session_id: longer than 256 bytes",
       on([=](U& u) { u.set_session_id(id257); })},
      {"usage.lane: longer than 128 bytes",
       on([=](U& u) { u.set_lane(name129); })},
      {"usage.request_id: required", on([](U& u) { u.clear_request_id(); })},
      {"usage.response_time: required",
       on([](U& u) { u.clear_response_time(); })},
      {"usage.provider: required",
       on([](U& u) { u.set_provider(v1::PROVIDER_UNSPECIFIED); })},
      {"usage.model: longer than 128 bytes",
       on([=](U& u) { u.set_model(name129); })},
      {"usage: one of normalized or raw_usage_json is required",
       on([](U& u) { u.clear_normalized(); })},
      {"usage.normalized: ",
       on([](U& u) { u.mutable_normalized()->set_cache_read_tokens(-1); })},
      {"usage.normalized: ", on([](U& u) {
         u.mutable_normalized()->set_output_tokens(1'000'000'000'001);
       })},
      {"usage: raw_usage_json: ", on([](U& u) {
         u.clear_normalized();
         u.set_raw_usage_json("{\"input_tokens\": 1, \"pad\": \"" +
                              std::string(70000, 'p') + "\"}");
       })},
      {"usage.provider_diagnostics.cache_miss_reason: required", on([](U& u) {
         u.mutable_provider_diagnostics()->set_cache_missed_input_tokens(5);
       })},
      {"usage.provider_diagnostics.cache_miss_reason: longer than 256 bytes",
       on([](U& u) {
         u.mutable_provider_diagnostics()->set_cache_miss_reason(
             std::string(1 << 20, 'r'));
       })},
      {"usage.provider_diagnostics.cache_missed_input_tokens: "
       "-9223372036854775808 is outside",
       on([](U& u) {
         v1::ProviderCacheDiagnostics* d = u.mutable_provider_diagnostics();
         d->set_cache_miss_reason("tools_changed");
         d->set_cache_missed_input_tokens(INT64_MIN);
       })},
      {"usage.provider_diagnostics.cache_missed_input_tokens: "
       "1000000000001 is outside",
       on([](U& u) {
         v1::ProviderCacheDiagnostics* d = u.mutable_provider_diagnostics();
         d->set_cache_miss_reason("tools_changed");
         d->set_cache_missed_input_tokens(1'000'000'000'001);
       })},
  };
}

TEST_F(BadInputTest, EveryBoundIsCheckedAndRefusedAloneOnTheStream) {
  std::vector<BadRecord> cases = BadSnapshots();
  for (BadRecord& bad : BadUsages()) cases.push_back(std::move(bad));
  RawRecordStream stream(channel_);
  for (size_t i = 0; i < cases.size(); ++i) {
    v1::RecordRequest request;
    *request.mutable_snapshot() = TurnSnapshot(kAgent, "matrix", 0);
    cases[i].spoil(request);
    ASSERT_TRUE(stream.Send(request.SerializeAsString())) << i;
  }
  // Invalid UTF-8 in a string of each message kind, too.
  v1::RecordRequest utf8;
  *utf8.mutable_snapshot() = TurnSnapshot(kAgent, "matrix", 0);
  utf8.mutable_snapshot()->set_model("mode#");
  ASSERT_TRUE(stream.Send(WithInvalidUtf8(utf8, "mode#")));
  *utf8.mutable_usage() = TurnUsage(kAgent, "matrix", 0);
  utf8.mutable_usage()->mutable_provider_diagnostics()->set_cache_miss_reason(
      "reaso#");
  ASSERT_TRUE(stream.Send(WithInvalidUtf8(utf8, "reaso#")));
  ASSERT_TRUE(stream.Send(SnapshotRecord(TurnSnapshot(kAgent, "matrix", 1))));
  std::vector<v1::RecordAck> acks;
  ASSERT_TRUE(stream.Close(&acks).ok());
  ASSERT_EQ(acks.size(), cases.size() + 3);
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(acks[i].code(), grpc::StatusCode::INVALID_ARGUMENT)
        << cases[i].expected;
    EXPECT_TRUE(acks[i].message().starts_with(cases[i].expected))
        << "expected " << cases[i].expected << "\n got " << acks[i].message();
  }
  EXPECT_EQ(acks[cases.size()].message(), "snapshot.model: not valid UTF-8");
  EXPECT_EQ(acks[cases.size() + 1].message(),
            "usage.provider_diagnostics.cache_miss_reason: not valid UTF-8");
  EXPECT_EQ(acks.back().code(), grpc::StatusCode::OK);
  EXPECT_EQ(StoredSnapshots(), (std::set<std::string>{"matrix-1"}));
}

TEST_F(BadInputTest, QueryFiltersAreBounded) {
  auto stub = daemon_.NewStub();
  const std::string name129(129, 'a'), id257(257, 'i');
  auto list = [&](std::function<void(v1::ListBreaksRequest&)> spoil) {
    grpc::ClientContext context;
    v1::ListBreaksRequest request;
    spoil(request);
    v1::ListBreaksResponse response;
    const grpc::Status status = stub->ListBreaks(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    return status.error_message();
  };
  using L = v1::ListBreaksRequest;
  EXPECT_EQ(list([&](L& r) { r.set_agent(name129); }),
            "list_breaks.agent: longer than 128 bytes");
  EXPECT_EQ(list([&](L& r) { r.set_session_id(id257); }),
            "list_breaks.session_id: longer than 256 bytes");
  EXPECT_EQ(list([&](L& r) { r.set_lane(name129); }),
            "list_breaks.lane: longer than 128 bytes");
  EXPECT_EQ(list([&](L& r) { r.set_model(name129); }),
            "list_breaks.model: longer than 128 bytes");
  EXPECT_EQ(list([](L& r) { r.set_reason(static_cast<v1::Reason>(999)); }),
            "list_breaks.reason: unknown value");
  EXPECT_EQ(list([](L& r) { r.set_page_token(std::string(513, 't')); }),
            "list_breaks.page_token: longer than 512 bytes");
  EXPECT_EQ(list([](L& r) { r.mutable_since()->set_nanos(-5); }),
            "list_breaks.since: out of range");
  EXPECT_EQ(list([](L& r) { r.mutable_until()->set_seconds(INT64_MAX); }),
            "list_breaks.until: out of range");
  EXPECT_EQ(list([](L& r) { r.set_page_size(-1); }),
            "page_size must not be negative");

  auto explain = [&](const std::string& id) {
    grpc::ClientContext context;
    v1::ExplainBreakRequest request;
    request.set_break_id(id);
    v1::ExplainBreakResponse response;
    const grpc::Status status =
        stub->ExplainBreak(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    return status.error_message();
  };
  EXPECT_EQ(explain(""), "break_id: required");
  EXPECT_EQ(explain(std::string(65, 'f')), "break_id: longer than 64 bytes");

  auto timeline = [&](std::function<void(v1::GetLaneTimelineRequest&)> spoil) {
    grpc::ClientContext context;
    v1::GetLaneTimelineRequest request;
    request.set_agent("a");
    request.set_session_id("s");
    spoil(request);
    v1::GetLaneTimelineResponse response;
    const grpc::Status status =
        stub->GetLaneTimeline(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    return status.error_message();
  };
  using T = v1::GetLaneTimelineRequest;
  EXPECT_EQ(timeline([](T& r) { r.clear_agent(); }), "agent: required");
  EXPECT_EQ(timeline([&](T& r) { r.set_agent(name129); }),
            "agent: longer than 128 bytes");
  EXPECT_EQ(timeline([&](T& r) { r.set_session_id(id257); }),
            "session_id: longer than 256 bytes");
  EXPECT_EQ(timeline([&](T& r) { r.set_lane(name129); }),
            "lane: longer than 128 bytes");

  auto watch = [&](std::function<void(v1::WatchBreaksRequest&)> spoil) {
    grpc::ClientContext context;
    v1::WatchBreaksRequest request;
    spoil(request);
    auto reader = stub->WatchBreaks(&context, request);
    v1::PromptCacheBreak ignored;
    while (reader->Read(&ignored)) {
    }
    const grpc::Status status = reader->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    return status.error_message();
  };
  using W = v1::WatchBreaksRequest;
  EXPECT_EQ(watch([&](W& r) { r.set_agent(name129); }),
            "watch_breaks.agent: longer than 128 bytes");
  EXPECT_EQ(watch([&](W& r) { r.set_model(name129); }),
            "watch_breaks.model: longer than 128 bytes");
  EXPECT_EQ(watch([&](W& r) { r.set_session_id(id257); }),
            "watch_breaks.session_id: longer than 256 bytes");
  EXPECT_EQ(watch([](W& r) { r.set_reason(static_cast<v1::Reason>(999)); }),
            "watch_breaks.reason: unknown value");
}

// Breaks as large as the bounds allow (2,000 tools with 256-byte names, all
// replaced on every turn: ~1 MB of tool names per break) still list: every
// ListBreaks reply stays under the default 4 MiB client limit, by paging.
TEST_F(BadInputTest, ListBreaksPagesByBytesUnderTheClientLimit) {
  auto stub = daemon_.NewStub();
  constexpr int kTurns = 9;
  for (int turn = 0; turn < kTurns; ++turn) {
    v1::RecordSnapshotRequest snapshot;
    v1::Snapshot& s = *snapshot.mutable_snapshot() =
        TurnSnapshot(kAgent, "large", turn);
    s.clear_tools();
    for (int i = 0; i < 2000; ++i) {
      std::string name = std::to_string(turn % 2) + "-" + std::to_string(i);
      name.resize(256, 'n');
      v1::ToolRef* tool = s.add_tools();
      tool->set_name(name);
      tool->set_schema_hash(i);
    }
    grpc::ClientContext snapshot_context;
    v1::RecordSnapshotResponse ignored;
    ASSERT_TRUE(
        stub->RecordSnapshot(&snapshot_context, snapshot, &ignored).ok());
    v1::RecordUsageRequest usage;
    *usage.mutable_usage() = TurnUsage(kAgent, "large", turn);
    usage.mutable_usage()->mutable_normalized()->set_cache_read_tokens(0);
    usage.mutable_usage()->mutable_normalized()->set_cache_write_tokens(20000);
    grpc::ClientContext usage_context;
    v1::RecordUsageResponse response;
    ASSERT_TRUE(stub->RecordUsage(&usage_context, usage, &response).ok());
  }
  int breaks = 0, pages = 0;
  std::string token;
  do {
    grpc::ClientContext context;  // The default 4 MiB receive limit.
    v1::ListBreaksRequest request;
    request.set_session_id("large");
    request.set_page_token(token);
    v1::ListBreaksResponse response;
    const grpc::Status status = stub->ListBreaks(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_LT(response.ByteSizeLong(), 4u * 1024 * 1024);
    breaks += response.breaks_size();
    ++pages;
    token = response.next_page_token();
  } while (!token.empty() && pages < 100);
  EXPECT_EQ(breaks, kTurns - 1);
  EXPECT_GT(pages, 1);

  grpc::ClientContext context;
  v1::GetLaneTimelineRequest request;
  request.set_agent(kAgent);
  request.set_session_id("large");
  v1::GetLaneTimelineResponse timeline;
  ASSERT_TRUE(stub->GetLaneTimeline(&context, request, &timeline).ok());
  EXPECT_EQ(timeline.turns_size(), kTurns);
}

}  // namespace
}  // namespace cachewatch
