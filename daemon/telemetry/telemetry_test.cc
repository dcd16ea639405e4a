#include "daemon/telemetry/telemetry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "daemon/telemetry/test_scrape.h"

namespace cachewatch {
namespace {

using ::cachewatch::testing::Find;
using ::cachewatch::testing::Named;
using ::cachewatch::testing::Sample;
using ::testing::DoubleNear;
using ::testing::Optional;

class TelemetryTest : public ::testing::Test {
 protected:
  std::vector<Sample> Scrape() {
    return ::cachewatch::testing::Scrape(*telemetry_.registry());
  }

  Telemetry telemetry_{std::make_shared<prometheus::Registry>(), "1.2.3"};
};

TEST_F(TelemetryTest, IngestOutcomesStartAtZeroAndCount) {
  std::vector<Sample> samples = Scrape();
  EXPECT_EQ(Named(samples, "cachewatch_ingest_records_total").size(), 12u);
  for (const Sample& sample :
       Named(samples, "cachewatch_ingest_records_total")) {
    EXPECT_EQ(sample.value, 0);
  }

  telemetry_.OnIngest(RecordKind::kUsage, IngestOutcome::kDuplicate);
  telemetry_.OnIngest(RecordKind::kUsage, IngestOutcome::kDuplicate);
  telemetry_.OnIngest(RecordKind::kSnapshot, IngestOutcome::kResourceExhausted);
  telemetry_.OnIngest(RecordKind::kSnapshot, IngestOutcome::kUnauthenticated);
  samples = Scrape();
  EXPECT_EQ(Find(samples, "cachewatch_ingest_records_total",
                 {{"kind", "usage"}, {"outcome", "duplicate"}}),
            2);
  EXPECT_EQ(Find(samples, "cachewatch_ingest_records_total",
                 {{"kind", "snapshot"}, {"outcome", "resource_exhausted"}}),
            1);
  EXPECT_EQ(Find(samples, "cachewatch_ingest_records_total",
                 {{"kind", "snapshot"}, {"outcome", "unauthenticated"}}),
            1);
  EXPECT_EQ(Find(samples, "cachewatch_ingest_records_total",
                 {{"kind", "usage"}, {"outcome", "accepted"}}),
            0);
}

TEST_F(TelemetryTest, BuildInfoAndDaemonHealth) {
  std::vector<Sample> samples = Scrape();
  EXPECT_EQ(Find(samples, "cachewatch_build_info", {{"version", "1.2.3"}}), 1);
  EXPECT_EQ(Find(samples, "cachewatch_store_healthy"), 1);

  telemetry_.SetStoreHealthy(false);
  telemetry_.SetStoreQueueDepth(42);
  telemetry_.ObserveStoreCommit(0.003, 1000, true);
  telemetry_.ObserveStoreCommit(0.2, 50, false);
  telemetry_.SetActiveLanes(7);
  telemetry_.SetWatchSubscribers(3);
  telemetry_.OnRetentionDeleted(120);
  telemetry_.OnRetentionDeleted(80);
  samples = Scrape();
  EXPECT_EQ(Find(samples, "cachewatch_store_healthy"), 0);
  EXPECT_EQ(Find(samples, "cachewatch_store_queue_records"), 42);
  EXPECT_EQ(Find(samples, "cachewatch_store_committed_records_total"), 1000);
  EXPECT_EQ(Find(samples, "cachewatch_store_commit_failures_total"), 1);
  EXPECT_EQ(Find(samples, "cachewatch_store_commit_duration_seconds_count"), 2);
  EXPECT_THAT(Find(samples, "cachewatch_store_commit_duration_seconds_sum"),
              Optional(DoubleNear(0.203, 1e-9)));
  EXPECT_EQ(Find(samples, "cachewatch_store_commit_duration_seconds_bucket",
                 {{"le", "0.005"}}),
            1);
  EXPECT_EQ(Find(samples, "cachewatch_active_lanes"), 7);
  EXPECT_EQ(Find(samples, "cachewatch_watch_subscribers"), 3);
  EXPECT_EQ(Find(samples, "cachewatch_retention_deleted_rows_total"), 200);
  EXPECT_EQ(Find(samples, "cachewatch_export_failures_total"), 0);
  telemetry_.OnExportFailed();
  EXPECT_EQ(Find(Scrape(), "cachewatch_export_failures_total"), 1);
}

}  // namespace
}  // namespace cachewatch
