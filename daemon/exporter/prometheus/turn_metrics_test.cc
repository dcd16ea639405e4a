#include "daemon/exporter/prometheus/turn_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "daemon/core/lane_tracker.h"
#include "daemon/core/test_turns.h"
#include "daemon/telemetry/test_scrape.h"

namespace cachewatch {
namespace {

using ::cachewatch::testing::BaseSnapshot;
using ::cachewatch::testing::Find;
using ::cachewatch::testing::kSecond;
using ::cachewatch::testing::LabelMap;
using ::cachewatch::testing::MakeTurn;
using ::cachewatch::testing::Named;
using ::cachewatch::testing::Sample;
using ::cachewatch::testing::Usage;
using ::cachewatch::testing::UsageRecord;
using ::testing::DoubleNear;
using ::testing::IsEmpty;
using ::testing::Optional;

constexpr char kModel[] = "claude-sonnet-4-5";

// The labels of BaseSnapshot's lane, plus `extra`.
LabelMap Lane(LabelMap extra = {}) {
  extra.emplace("agent", "agent");
  extra.emplace("provider", "anthropic");
  extra.emplace("model", kModel);
  return extra;
}

// A turn of BaseSnapshot's lane with the given model, usage and verdict.
ClassifiedTurn Classified(const std::string& model, v1::Verdict verdict,
                          const v1::NormalizedUsage& usage) {
  v1::Snapshot snapshot = BaseSnapshot("r2", 30);
  snapshot.set_model(model);
  ClassifiedTurn turn{LaneKeyOf(snapshot), MakeTurn(snapshot, usage), {}};
  turn.classification.set_verdict(verdict);
  return turn;
}

// A break of BaseSnapshot's lane after a 20,000-token cached prefix.
ClassifiedTurn Break(v1::Reason reason, int64_t missed,
                     const std::string& model = kModel) {
  ClassifiedTurn turn =
      Classified(model, v1::VERDICT_BREAK, Usage(20000 - missed, missed, 10));
  v1::TurnClassification& classification = turn.classification;
  classification.set_expected_reuse_tokens(20000);
  classification.set_missed_tokens(missed);
  v1::PromptCacheBreak& event = *classification.mutable_cache_break();
  event.set_agent("agent");
  event.set_session_id("s1");
  event.set_lane("main");
  event.set_provider(v1::PROVIDER_ANTHROPIC);
  event.set_previous_request_id("r1");
  event.set_request_id("r2");
  event.set_model(model);
  event.set_primary_reason(reason);
  event.add_reasons(reason);
  event.set_evidence(v1::EVIDENCE_CLIENT_EXPLAINED);
  event.set_expected_reuse_tokens(20000);
  event.set_missed_tokens(missed);
  return turn;
}

class MetricsTest : public ::testing::Test {
 protected:
  std::vector<Sample> Scrape() {
    return ::cachewatch::testing::Scrape(*metrics_.registry());
  }

  TurnMetrics metrics_{MetricsOptions{},
                       std::make_shared<prometheus::Registry>()};
};

TEST_F(MetricsTest, TrackedBreakCountsItsReasonAndLostTokens) {
  LaneTracker tracker{TrackerOptions{}, ClassifierOptions{}};
  const int64_t now = 5 * kSecond;
  tracker.AddSnapshot(std::make_shared<v1::Snapshot>(BaseSnapshot("r1", 0)),
                      now);
  const v1::NormalizedUsage usage = Usage(0, 20000, 10);
  UsageResult first = tracker.AddUsage(UsageRecord("r1", 2, usage), usage, now);
  v1::Snapshot reordered = BaseSnapshot("r2", 30);
  reordered.mutable_tools()->SwapElements(0, 1);
  tracker.AddSnapshot(std::make_shared<v1::Snapshot>(reordered), now);
  UsageResult second =
      tracker.AddUsage(UsageRecord("r2", 32, usage), usage, now);
  ASSERT_EQ(second.classification.verdict(), v1::VERDICT_BREAK);
  ASSERT_EQ(second.classification.cache_break().missed_tokens(), 20000);
  for (const UsageResult* result : {&first, &second}) {
    for (const ClassifiedTurn& turn : result->classified) {
      metrics_.OnTurnClassified(turn);
    }
  }

  const std::vector<Sample> samples = Scrape();
  EXPECT_EQ(Find(samples, "cachewatch_turns_total",
                 Lane({{"verdict", "cold_start"}})),
            1);
  EXPECT_EQ(
      Find(samples, "cachewatch_turns_total", Lane({{"verdict", "break"}})), 1);
  EXPECT_EQ(Find(samples, "cachewatch_turns_total", Lane({{"verdict", "ok"}})),
            0);
  EXPECT_EQ(Find(samples, "cachewatch_breaks_total",
                 Lane({{"reason", "tools_order_changed"}})),
            1);
  EXPECT_EQ(Named(samples, "cachewatch_breaks_total").size(), 1u);
  EXPECT_EQ(Find(samples, "cachewatch_cache_lost_tokens_total",
                 Lane({{"reason", "tools_order_changed"}})),
            20000);
  EXPECT_EQ(Find(samples, "cachewatch_cache_read_tokens_total", Lane()), 0);
  EXPECT_EQ(Find(samples, "cachewatch_cache_write_tokens_total", Lane()),
            40000);
  EXPECT_EQ(Find(samples, "cachewatch_prompt_tokens_total", Lane()), 40020);
  EXPECT_EQ(Find(samples, "cachewatch_turn_cache_hit_ratio_count", Lane()), 2);
  EXPECT_EQ(Find(samples, "cachewatch_turn_cache_hit_ratio_sum", Lane()), 0);
}

TEST_F(MetricsTest, OkTurnsCountNoBreaks) {
  metrics_.OnTurnClassified(
      Classified(kModel, v1::VERDICT_COLD_START, Usage(0, 20000, 10)));
  metrics_.OnTurnClassified(
      Classified(kModel, v1::VERDICT_OK, Usage(20000, 500, 10)));
  metrics_.OnTurnClassified(
      Classified(kModel, v1::VERDICT_EXPECTED_DROP, Usage(0, 20000, 10)));

  const std::vector<Sample> samples = Scrape();
  EXPECT_EQ(Find(samples, "cachewatch_turns_total", Lane({{"verdict", "ok"}})),
            1);
  EXPECT_EQ(Find(samples, "cachewatch_turns_total",
                 Lane({{"verdict", "expected_drop"}})),
            1);
  EXPECT_EQ(
      Find(samples, "cachewatch_turns_total", Lane({{"verdict", "break"}})), 0);
  EXPECT_THAT(Named(samples, "cachewatch_breaks_total"), IsEmpty());
  EXPECT_THAT(Named(samples, "cachewatch_cache_lost_tokens_total"), IsEmpty());
  EXPECT_EQ(Find(samples, "cachewatch_cache_read_tokens_total", Lane()), 20000);
}

TEST_F(MetricsTest, TurnsWithoutAFinalVerdictAreIgnored) {
  metrics_.OnTurnClassified(
      Classified(kModel, v1::VERDICT_PENDING, Usage(0, 20000, 10)));
  EXPECT_THAT(Named(Scrape(), "cachewatch_turns_total"), IsEmpty());
}

TEST_F(MetricsTest, HitRatioHistogramObservesTurnsWithAPrompt) {
  metrics_.OnTurnClassified(
      Classified(kModel, v1::VERDICT_OK, Usage(9000, 0, 1000)));  // 0.9
  metrics_.OnTurnClassified(
      Classified(kModel, v1::VERDICT_OK, Usage(500, 250, 250)));  // 0.5
  metrics_.OnTurnClassified(
      Classified(kModel, v1::VERDICT_OK, Usage(0, 0, 0)));  // No prompt.

  const std::vector<Sample> samples = Scrape();
  EXPECT_EQ(Find(samples, "cachewatch_turn_cache_hit_ratio_count", Lane()), 2);
  EXPECT_THAT(Find(samples, "cachewatch_turn_cache_hit_ratio_sum", Lane()),
              Optional(DoubleNear(1.4, 1e-9)));
  // le is inclusive: 0.5 falls in the 0.5 bucket, 0.9 in the 0.9 one.
  EXPECT_EQ(Find(samples, "cachewatch_turn_cache_hit_ratio_bucket",
                 Lane({{"le", "0.25"}})),
            0);
  EXPECT_EQ(Find(samples, "cachewatch_turn_cache_hit_ratio_bucket",
                 Lane({{"le", "0.5"}})),
            1);
  EXPECT_EQ(Find(samples, "cachewatch_turn_cache_hit_ratio_bucket",
                 Lane({{"le", "0.9"}})),
            2);
  EXPECT_EQ(Find(samples, "cachewatch_turn_cache_hit_ratio_bucket",
                 Lane({{"le", "+Inf"}})),
            2);
}

TEST_F(MetricsTest, CostIsCountedOnlyForBreaksWithAPrice) {
  metrics_.OnTurnClassified(Break(v1::REASON_SYSTEM_CHANGED, 18000));
  EXPECT_THAT(Named(Scrape(), "cachewatch_break_estimated_cost_usd_total"),
              IsEmpty());

  for (double cost : {0.25, 0.5}) {
    ClassifiedTurn priced = Break(v1::REASON_SYSTEM_CHANGED, 18000);
    priced.classification.mutable_cache_break()->set_has_estimated_cost(true);
    priced.classification.mutable_cache_break()->set_estimated_extra_cost_usd(
        cost);
    metrics_.OnTurnClassified(priced);
  }
  const std::vector<Sample> samples = Scrape();
  EXPECT_EQ(Find(samples, "cachewatch_break_estimated_cost_usd_total",
                 Lane({{"reason", "system_changed"}})),
            0.75);
  EXPECT_EQ(Find(samples, "cachewatch_breaks_total",
                 Lane({{"reason", "system_changed"}})),
            3);
  EXPECT_EQ(Find(samples, "cachewatch_cache_lost_tokens_total",
                 Lane({{"reason", "system_changed"}})),
            54000);
}

TEST_F(MetricsTest, ProviderDiagnosticsCountAgreement) {
  for (v1::ProviderAgreement agreement :
       {v1::PROVIDER_AGREEMENT_AGREE, v1::PROVIDER_AGREEMENT_AGREE,
        v1::PROVIDER_AGREEMENT_DISAGREE, v1::PROVIDER_AGREEMENT_UNSPECIFIED}) {
    ClassifiedTurn turn = Break(v1::REASON_TOOLS_SCHEMA_CHANGED, 5000);
    turn.classification.mutable_cache_break()->set_provider_agreement(
        agreement);
    metrics_.OnTurnClassified(turn);
  }
  const std::vector<Sample> samples = Scrape();
  EXPECT_EQ(Find(samples, "cachewatch_provider_diagnostics_total",
                 {{"provider", "anthropic"}, {"agreement", "agree"}}),
            2);
  EXPECT_EQ(Find(samples, "cachewatch_provider_diagnostics_total",
                 {{"provider", "anthropic"}, {"agreement", "disagree"}}),
            1);
  EXPECT_EQ(Named(samples, "cachewatch_provider_diagnostics_total").size(), 2u);
}

TEST_F(MetricsTest, ModelsBeyondTheCapAreReportedAsOther) {
  constexpr int kModels = 500;
  const size_t cap = MetricsOptions{}.max_label_values;
  for (int i = 0; i < kModels; ++i) {
    metrics_.OnTurnClassified(Classified("model-" + std::to_string(i),
                                         v1::VERDICT_OK, Usage(0, 0, 10)));
  }
  // An admitted model keeps its own series after the cap is reached.
  metrics_.OnTurnClassified(
      Classified("model-0", v1::VERDICT_OK, Usage(0, 0, 10)));

  const std::vector<Sample> samples = Scrape();
  std::set<std::string> models;
  double turns = 0;
  for (const Sample& sample : Named(samples, "cachewatch_turns_total")) {
    models.insert(sample.labels.at("model"));
    turns += sample.value;
  }
  EXPECT_EQ(models.size(), cap + 1);
  EXPECT_EQ(models.count("other"), 1u);
  EXPECT_EQ(turns, kModels + 1);
  const auto ok_turns = [&samples](const std::string& model) {
    return Find(samples, "cachewatch_turns_total",
                {{"agent", "agent"},
                 {"provider", "anthropic"},
                 {"model", model},
                 {"verdict", "ok"}});
  };
  EXPECT_EQ(ok_turns("model-0"), 2);
  EXPECT_EQ(ok_turns("other"), kModels - cap);
  EXPECT_EQ(
      Find(samples, "cachewatch_label_overflow_total", {{"label", "model"}}),
      kModels - cap);
  for (const char* label : {"agent", "provider", "reason"}) {
    EXPECT_EQ(
        Find(samples, "cachewatch_label_overflow_total", {{"label", label}}), 0)
        << label;
  }
}

TEST_F(MetricsTest, EmptyModelIsReportedAsUnknown) {
  metrics_.OnTurnClassified(Classified("", v1::VERDICT_OK, Usage(0, 0, 10)));
  EXPECT_EQ(Find(Scrape(), "cachewatch_turns_total",
                 {{"agent", "agent"},
                  {"provider", "anthropic"},
                  {"model", "unknown"},
                  {"verdict", "ok"}}),
            1);
}

TEST(MetricsCapTest, ReasonsBeyondTheCapAreReportedAsOther) {
  TurnMetrics metrics(MetricsOptions{.max_label_values = 2},
                      std::make_shared<prometheus::Registry>());
  for (v1::Reason reason :
       {v1::REASON_MODEL_CHANGED, v1::REASON_TTL_EXPIRED,
        v1::REASON_SYSTEM_CHANGED, v1::REASON_MESSAGES_CHANGED}) {
    metrics.OnTurnClassified(Break(reason, 3000));
  }
  const std::vector<Sample> samples =
      ::cachewatch::testing::Scrape(*metrics.registry());
  EXPECT_EQ(
      Find(samples, "cachewatch_breaks_total", Lane({{"reason", "other"}})), 2);
  EXPECT_EQ(Find(samples, "cachewatch_cache_lost_tokens_total",
                 Lane({{"reason", "other"}})),
            6000);
  EXPECT_EQ(
      Find(samples, "cachewatch_label_overflow_total", {{"label", "reason"}}),
      2);
}

TEST(MetricsCapTest, ABreakOverTheCapCountsEachLabelOnce) {
  TurnMetrics metrics(MetricsOptions{.max_label_values = 1},
                      std::make_shared<prometheus::Registry>());
  metrics.OnTurnClassified(
      Classified(kModel, v1::VERDICT_OK, Usage(20000, 0, 10)));
  ClassifiedTurn turn = Break(v1::REASON_MODEL_CHANGED, 20000, "gpt-5");
  v1::PromptCacheBreak& event = *turn.classification.mutable_cache_break();
  event.set_has_estimated_cost(true);
  event.set_estimated_extra_cost_usd(0.1);
  event.set_provider_agreement(v1::PROVIDER_AGREEMENT_AGREE);
  metrics.OnTurnClassified(turn);

  const std::vector<Sample> samples =
      ::cachewatch::testing::Scrape(*metrics.registry());
  const LabelMap other = {{"agent", "agent"},
                          {"provider", "anthropic"},
                          {"model", "other"},
                          {"reason", "model_changed"}};
  EXPECT_EQ(Find(samples, "cachewatch_breaks_total", other), 1);
  EXPECT_EQ(Find(samples, "cachewatch_cache_lost_tokens_total", other), 20000);
  EXPECT_EQ(Find(samples, "cachewatch_break_estimated_cost_usd_total", other),
            0.1);
  EXPECT_EQ(Find(samples, "cachewatch_provider_diagnostics_total",
                 {{"provider", "anthropic"}, {"agreement", "agree"}}),
            1);
  for (const auto& [label, overflows] :
       {std::pair{"agent", 0}, {"provider", 0}, {"model", 1}, {"reason", 0}}) {
    EXPECT_EQ(
        Find(samples, "cachewatch_label_overflow_total", {{"label", label}}),
        overflows)
        << label;
  }
}

TEST(MetricsConcurrencyTest, ConcurrentTurnsAreAllCounted) {
  constexpr int kThreads = 4;
  constexpr int kTurnsPerThread = 2000;
  constexpr int kModels = 20;
  TurnMetrics metrics(MetricsOptions{.max_label_values = 10},
                      std::make_shared<prometheus::Registry>());
  // Admits the breaks' labels before the models fill the cap.
  metrics.OnTurnClassified(Break(v1::REASON_TTL_EXPIRED, 4000));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&metrics, t] {
      for (int i = 0; i < kTurnsPerThread; ++i) {
        const std::string model = "model-" + std::to_string((t + i) % kModels);
        metrics.OnTurnClassified(
            i % 2 == 0 ? Classified(model, v1::VERDICT_OK, Usage(900, 0, 100))
                       : Break(v1::REASON_TTL_EXPIRED, 4000));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  const std::vector<Sample> samples =
      ::cachewatch::testing::Scrape(*metrics.registry());
  double turns = 0;
  double other = 0;
  for (const Sample& sample : Named(samples, "cachewatch_turns_total")) {
    turns += sample.value;
    if (sample.labels.at("model") == "other") other += sample.value;
  }
  EXPECT_EQ(turns, kThreads * kTurnsPerThread + 1);
  EXPECT_EQ(
      Find(samples, "cachewatch_label_overflow_total", {{"label", "model"}}),
      other);
  EXPECT_EQ(Find(samples, "cachewatch_breaks_total",
                 Lane({{"reason", "ttl_expired"}})),
            kThreads * kTurnsPerThread / 2 + 1);
}

TEST(MetricsSeriesCapTest, CombinationsOverTheCapAreFoldedIntoOneOtherSet) {
  TurnMetrics metrics(MetricsOptions{.max_label_values = 100, .max_series = 3},
                      std::make_shared<prometheus::Registry>());
  for (int i = 0; i < 10; ++i) {
    metrics.OnTurnClassified(Classified("model-" + std::to_string(i),
                                        v1::VERDICT_OK, Usage(0, 0, 10)));
  }
  // A set admitted before the cap keeps its own series.
  metrics.OnTurnClassified(
      Classified("model-0", v1::VERDICT_OK, Usage(0, 0, 10)));
  const std::vector<Sample> samples =
      ::cachewatch::testing::Scrape(*metrics.registry());
  std::set<std::string> models;
  for (const Sample& sample : Named(samples, "cachewatch_turns_total")) {
    models.insert(sample.labels.at("model"));
  }
  EXPECT_EQ(models,
            (std::set<std::string>{"model-0", "model-1", "model-2", "other"}));
  EXPECT_EQ(Find(samples, "cachewatch_turns_total",
                 {{"agent", "other"},
                  {"provider", "other"},
                  {"model", "other"},
                  {"verdict", "ok"}}),
            7);
  EXPECT_EQ(Find(samples, "cachewatch_turns_total",
                 {{"agent", "agent"},
                  {"provider", "anthropic"},
                  {"model", "model-0"},
                  {"verdict", "ok"}}),
            2);
  EXPECT_EQ(Find(samples, "cachewatch_metric_series_overflow_total",
                 {{"family", "turns"}}),
            7);
  EXPECT_EQ(
      Find(samples, "cachewatch_label_overflow_total", {{"label", "model"}}),
      0);
}

}  // namespace
}  // namespace cachewatch
