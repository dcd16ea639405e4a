#include "daemon/pipeline/validation.h"

#include <google/protobuf/util/time_util.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "daemon/core/test_turns.h"

namespace cachewatch {
namespace {

using ::cachewatch::testing::BaseSnapshot;
using ::cachewatch::testing::kSecond;
using ::cachewatch::testing::kT0;
using ::cachewatch::testing::Usage;
using ::cachewatch::testing::UsageRecord;
using google::protobuf::util::TimeUtil;

constexpr int64_t kNow = kT0 + 3600 * kSecond;

struct SnapshotCase {
  const char* field;  // The message must start with this.
  std::function<void(v1::Snapshot&)> corrupt;
};

const SnapshotCase kBadSnapshots[] = {
    {"snapshot.agent: required", [](v1::Snapshot& s) { s.clear_agent(); }},
    {"snapshot.agent: longer than 128",
     [](v1::Snapshot& s) { s.set_agent(std::string(129, 'a')); }},
    {"snapshot.session_id: required",
     [](v1::Snapshot& s) { s.clear_session_id(); }},
    {"snapshot.request_id: required",
     [](v1::Snapshot& s) { s.clear_request_id(); }},
    {"snapshot.lane: longer than",
     [](v1::Snapshot& s) { s.set_lane(std::string(200, 'l')); }},
    {"snapshot.request_time: required",
     [](v1::Snapshot& s) { s.clear_request_time(); }},
    {"snapshot.request_time: 1999",
     [](v1::Snapshot& s) {
       *s.mutable_request_time() = TimeUtil::SecondsToTimestamp(915148800);
     }},
    {"snapshot.request_time: ",
     [](v1::Snapshot& s) {
       *s.mutable_request_time() =
           TimeUtil::MicrosecondsToTimestamp(kNow + 2 * 86400 * kSecond);
     }},
    {"snapshot.provider: required",
     [](v1::Snapshot& s) { s.set_provider(v1::PROVIDER_UNSPECIFIED); }},
    {"snapshot.provider: required",
     [](v1::Snapshot& s) { s.set_provider(static_cast<v1::Provider>(99)); }},
    {"snapshot.model: required", [](v1::Snapshot& s) { s.clear_model(); }},
    {"snapshot.tools[1].name: required",
     [](v1::Snapshot& s) { s.mutable_tools(1)->clear_name(); }},
    {"snapshot.tools: 2001 tools",
     [](v1::Snapshot& s) {
       for (int i = 0; i < 1998; ++i) {
         *s.add_tools() = testing::Tool("t" + std::to_string(i), i);
       }
     }},
    {"snapshot.tools[2].name: longer than 256 bytes",
     [](v1::Snapshot& s) {
       s.mutable_tools(2)->set_name(std::string(257, 'x'));
     }},
    {"snapshot.system_sections[0].name: required",
     [](v1::Snapshot& s) { s.add_system_sections()->set_hash(1); }},
    {"snapshot.cache_control.breakpoints[1].ttl_seconds: 604801 s is more",
     [](v1::Snapshot& s) {
       for (uint32_t ttl : {300u, 604801u}) {
         auto* b = s.mutable_cache_control()->add_breakpoints();
         b->set_segment(v1::PROMPT_SEGMENT_TOOLS);
         b->set_ttl_seconds(ttl);
       }
     }},
    {"snapshot.cache_control.breakpoints[0].blocks_after: 100000 is not below",
     [](v1::Snapshot& s) {
       auto* b = s.mutable_cache_control()->add_breakpoints();
       b->set_segment(v1::PROMPT_SEGMENT_TOOLS);
       b->set_blocks_after(100000);
     }},
    {"snapshot.cache_control.breakpoints[0].segment: required",
     [](v1::Snapshot& s) { s.mutable_cache_control()->add_breakpoints(); }},
    {"snapshot.cache_control.breakpoints[0].index: 5 is past",
     [](v1::Snapshot& s) {
       s.add_message_chain(1);
       auto* b = s.mutable_cache_control()->add_breakpoints();
       b->set_segment(v1::PROMPT_SEGMENT_MESSAGES);
       b->set_index(5);
     }},
    {"snapshot.expected_drop: unknown value",
     [](v1::Snapshot& s) {
       s.set_expected_drop(static_cast<v1::ExpectedDrop>(42));
     }},
};

TEST(ValidationTest, GoodSnapshotPasses) {
  EXPECT_TRUE(ValidateSnapshot(BaseSnapshot("r1", 0), {}, kNow).ok());
}

TEST(ValidationTest, BadSnapshotsNameTheField) {
  for (const SnapshotCase& c : kBadSnapshots) {
    v1::Snapshot snapshot = BaseSnapshot("r1", 0);
    c.corrupt(snapshot);
    const absl::Status status = ValidateSnapshot(snapshot, {}, kNow);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.field;
    const std::string message(status.message());
    EXPECT_EQ(message.rfind(c.field, 0), 0u)
        << "expected prefix '" << c.field << "', got '" << message << "'";
  }
}

struct UsageCase {
  const char* field;
  std::function<void(v1::Usage&)> corrupt;
};

const UsageCase kBadUsages[] = {
    {"usage.request_id: required", [](v1::Usage& u) { u.clear_request_id(); }},
    {"usage.session_id: required", [](v1::Usage& u) { u.clear_session_id(); }},
    {"usage.lane: longer than 128 bytes",
     [](v1::Usage& u) { u.set_lane(std::string(129, 'l')); }},
    {"usage.response_time: required",
     [](v1::Usage& u) { u.clear_response_time(); }},
    {"usage.provider: required",
     [](v1::Usage& u) { u.set_provider(v1::PROVIDER_UNSPECIFIED); }},
    {"usage: one of normalized or raw_usage_json is required",
     [](v1::Usage& u) { u.clear_normalized(); }},
    {"usage.normalized: ",
     [](v1::Usage& u) { u.mutable_normalized()->set_cache_read_tokens(-5); }},
    {"usage: raw_usage_json: malformed JSON",
     [](v1::Usage& u) {
       u.clear_normalized();
       u.set_raw_usage_json("{\"input_tokens\": 12,");
     }},
    {"usage: raw_usage_json: ",
     [](v1::Usage& u) {
       u.clear_normalized();
       u.set_raw_usage_json("{\"input_tokens\": -3}");
     }},
};

TEST(ValidationTest, GoodUsagePassesAndIsNormalized) {
  v1::Usage usage = UsageRecord("r1", 1, Usage(100, 200, 300));
  absl::StatusOr<v1::NormalizedUsage> normalized =
      ValidateUsage(usage, {}, kNow);
  ASSERT_TRUE(normalized.ok()) << normalized.status();
  EXPECT_EQ(normalized->cache_write_tokens(), 200);

  usage.clear_normalized();
  usage.set_raw_usage_json(
      R"({"input_tokens":50,"cache_read_input_tokens":20000,)"
      R"("cache_creation_input_tokens":1000,"output_tokens":30})");
  normalized = ValidateUsage(usage, {}, kNow);
  ASSERT_TRUE(normalized.ok()) << normalized.status();
  EXPECT_EQ(normalized->cache_read_tokens(), 20000);
  EXPECT_EQ(normalized->uncached_input_tokens(), 50);
}

TEST(ValidationTest, BadUsagesNameTheField) {
  for (const UsageCase& c : kBadUsages) {
    v1::Usage usage = UsageRecord("r1", 1, Usage(100, 200, 300));
    c.corrupt(usage);
    const absl::StatusOr<v1::NormalizedUsage> result =
        ValidateUsage(usage, {}, kNow);
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument)
        << c.field;
    const std::string message(result.status().message());
    EXPECT_EQ(message.rfind(c.field, 0), 0u)
        << "expected prefix '" << c.field << "', got '" << message << "'";
  }
}

}  // namespace
}  // namespace cachewatch
