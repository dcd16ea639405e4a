#include "daemon/exporter/prometheus/turn_metrics.h"

#include <utility>

#include "daemon/core/classifier.h"
#include "daemon/core/provider_traits.h"
#include "daemon/core/usage_normalizer.h"
#include "daemon/telemetry/metric_families.h"
#include "daemon/util/enum_name.h"

namespace cachewatch {
namespace {

// The final verdicts, VERDICT_COLD_START .. VERDICT_BELOW_MIN_CACHEABLE.
static_assert(v1::VERDICT_BELOW_MIN_CACHEABLE - v1::VERDICT_COLD_START + 1 ==
              5);

constexpr std::array<double, 9> kHitRatioBuckets = {0.05, 0.1,  0.25, 0.5, 0.75,
                                                    0.9,  0.95, 0.99, 1};
}  // namespace

TurnMetrics::TurnMetrics(const MetricsOptions& options,
                         std::shared_ptr<prometheus::Registry> registry)
    : max_series_(options.max_series),
      registry_(std::move(registry)),
      turns_(CounterFamily(*registry_, "cachewatch_turns_total",
                           "Classified turns by verdict.")),
      breaks_(CounterFamily(*registry_, "cachewatch_breaks_total",
                            "Prompt cache breaks by primary reason.")),
      cache_read_tokens_(
          CounterFamily(*registry_, "cachewatch_cache_read_tokens_total",
                        "Prompt tokens read from the provider's cache.")),
      cache_write_tokens_(
          CounterFamily(*registry_, "cachewatch_cache_write_tokens_total",
                        "Prompt tokens written to the provider's cache.")),
      prompt_tokens_(CounterFamily(
          *registry_, "cachewatch_prompt_tokens_total",
          "Prompt tokens in total: uncached input, cache reads and cache "
          "writes.")),
      cache_lost_tokens_(CounterFamily(
          *registry_, "cachewatch_cache_lost_tokens_total",
          "Tokens expected from the cache but missed, by the primary reason "
          "of the break.")),
      hit_ratio_(HistogramFamily(
          *registry_, "cachewatch_turn_cache_hit_ratio",
          "Per turn, cache read tokens divided by prompt tokens.")),
      break_cost_(CounterFamily(
          *registry_, "cachewatch_break_estimated_cost_usd_total",
          "Estimated extra cost of breaks in USD, for models with a "
          "configured price.")),
      provider_diagnostics_(CounterFamily(
          *registry_, "cachewatch_provider_diagnostics_total",
          "Breaks the provider explained itself, by whether its reason "
          "agrees with cachewatch's.")),
      label_overflow_(CounterFamily(
          *registry_, "cachewatch_label_overflow_total",
          "Label values reported as \"other\" because the label reached its "
          "cap of distinct values.")),
      series_overflow_(CounterFamily(
          *registry_, "cachewatch_metric_series_overflow_total",
          "Turns (breaks) folded into the all-'other' label set because "
          "their kind of series had reached its cap.")),
      agent_(options.max_label_values,
             &label_overflow_.Add({{"label", "agent"}})),
      provider_(options.max_label_values,
                &label_overflow_.Add({{"label", "provider"}})),
      model_(options.max_label_values,
             &label_overflow_.Add({{"label", "model"}})),
      reason_(options.max_label_values,
              &label_overflow_.Add({{"label", "reason"}})),
      turn_labels_{{"agent", "provider", "model"},
                   {&agent_, &provider_, &model_},
                   &series_overflow_.Add({{"family", "turns"}})},
      break_labels_{{"agent", "provider", "model", "reason"},
                    {nullptr, nullptr, nullptr, &reason_},
                    &series_overflow_.Add({{"family", "breaks"}})},
      cost_labels_{break_labels_.names,
                   {},
                   &series_overflow_.Add({{"family", "break_cost"}})},
      diagnostics_labels_{
          {"provider", "agreement"},
          {},
          &series_overflow_.Add({{"family", "provider_diagnostics"}})} {
  for (int reason = 0; reason < v1::Reason_ARRAYSIZE; ++reason) {
    if (v1::Reason_IsValid(reason)) {
      reason_names_[reason] = ReasonName(static_cast<v1::Reason>(reason));
    }
  }
}

std::shared_ptr<prometheus::Registry> TurnMetrics::registry() {
  return registry_;
}

template <size_t N, typename Series, typename Make>
const std::pair<const LabelTuple<N>, Series>& TurnMetrics::FindOrCreate(
    LabelTupleMap<N, Series>& map, const LabelSet<N>& labels,
    const LabelTupleView<N>& raw, const Make& make) {
  // A capped label reports an admitted value as it is, so a series found
  // under the raw values is the right one and nothing overflowed. A raw
  // "other" may be a value over the cap, whose overflow must be counted: it
  // takes the slow path.
  LabelTupleView<N> reported = raw;
  bool fast_path = true;
  for (size_t i = 0; i < N; ++i) {
    if (labels.caps[i] == nullptr) continue;
    if (reported[i].empty()) reported[i] = LabelLimiter::kUnknown;
    if (reported[i] == LabelLimiter::kOther) fast_path = false;
  }
  if (fast_path) {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    auto it = map.find(reported);
    if (it != map.end()) return *it;
  }
  std::unique_lock<std::shared_mutex> lock(mutex_);
  LabelTuple<N> limited;
  for (size_t i = 0; i < N; ++i) {
    CappedLabel* cap = labels.caps[i];
    if (cap == nullptr) {
      limited[i] = std::string(raw[i]);
      continue;
    }
    bool overflowed = false;
    limited[i] = cap->limiter.Limit(raw[i], &overflowed);
    if (overflowed) cap->overflow->Increment();
  }
  auto it = map.find(limited);
  if (it == map.end() && map.size() >= max_series_) {
    // A new combination over the cap: folded into the all-"other" set
    // (which may itself be new: at most max_series + 1 sets).
    labels.series_overflow->Increment();
    for (std::string& value : limited) value = LabelLimiter::kOther;
    it = map.find(limited);
  }
  if (it == map.end()) {
    prometheus::Labels series_labels;
    for (size_t i = 0; i < N; ++i) {
      series_labels.emplace(std::string(labels.names[i]), limited[i]);
    }
    it = map.emplace(std::move(limited), make(series_labels)).first;
  }
  return *it;
}

std::string_view TurnMetrics::ReasonLabel(v1::Reason reason) const {
  // Out-of-range values (a newer client's enum) report as "unknown".
  if (reason < 0 || reason >= v1::Reason_ARRAYSIZE) return {};
  return reason_names_[reason];
}

void TurnMetrics::OnTurnClassified(const ClassifiedTurn& classified) {
  const v1::TurnClassification& classification = classified.classification;
  const int verdict = classification.verdict() - v1::VERDICT_COLD_START;
  if (verdict < 0 || verdict >= static_cast<int>(kVerdicts)) return;
  const Turn& turn = classified.turn;

  const auto& [reported, series] = FindOrCreate(
      turn_series_, turn_labels_,
      {classified.key.agent, ProviderName(turn.provider), turn.model},
      [this](const prometheus::Labels& labels) {
        TurnSeries created;
        for (size_t i = 0; i < kVerdicts; ++i) {
          prometheus::Labels with_verdict = labels;
          with_verdict.emplace(
              "verdict", EnumText(static_cast<v1::Verdict>(
                             v1::VERDICT_COLD_START + static_cast<int>(i))));
          created.turns[i] = &turns_.Add(with_verdict);
        }
        created.cache_read_tokens = &cache_read_tokens_.Add(labels);
        created.cache_write_tokens = &cache_write_tokens_.Add(labels);
        created.prompt_tokens = &prompt_tokens_.Add(labels);
        created.hit_ratio = &hit_ratio_.Add(labels, Buckets(kHitRatioBuckets));
        return created;
      });
  series.turns[verdict]->Increment();
  if (turn.usage.has_value()) {
    const v1::NormalizedUsage& usage = *turn.usage;
    const int64_t prompt_total = PromptTotalTokens(usage);
    series.cache_read_tokens->Increment(usage.cache_read_tokens());
    series.cache_write_tokens->Increment(usage.cache_write_tokens());
    series.prompt_tokens->Increment(prompt_total);
    if (prompt_total > 0) {
      series.hit_ratio->Observe(static_cast<double>(usage.cache_read_tokens()) /
                                static_cast<double>(prompt_total));
    }
  }

  if (classification.verdict() != v1::VERDICT_BREAK) return;
  // From here on agent, provider and model are the reported values.
  const v1::PromptCacheBreak& event = classification.cache_break();
  const auto& [break_labels, breaks] =
      FindOrCreate(break_series_, break_labels_,
                   {reported[0], reported[1], reported[2],
                    ReasonLabel(event.primary_reason())},
                   [this](const prometheus::Labels& labels) {
                     return BreakSeries{&breaks_.Add(labels),
                                        &cache_lost_tokens_.Add(labels)};
                   });
  breaks.breaks->Increment();
  breaks.lost_tokens->Increment(event.missed_tokens());
  if (event.has_estimated_cost()) {
    FindOrCreate(
        cost_series_, cost_labels_,
        {break_labels[0], break_labels[1], break_labels[2], break_labels[3]},
        [this](const prometheus::Labels& labels) {
          return &break_cost_.Add(labels);
        })
        .second->Increment(event.estimated_extra_cost_usd());
  }
  if (event.provider_agreement() != v1::PROVIDER_AGREEMENT_UNSPECIFIED) {
    const std::string_view agreement =
        event.provider_agreement() == v1::PROVIDER_AGREEMENT_AGREE ? "agree"
                                                                   : "disagree";
    FindOrCreate(diagnostics_series_, diagnostics_labels_,
                 {reported[1], agreement},
                 [this](const prometheus::Labels& labels) {
                   return &provider_diagnostics_.Add(labels);
                 })
        .second->Increment();
  }
}

absl::Status TurnMetrics::Export(const std::vector<ClassifiedTurn>& turns) {
  for (const ClassifiedTurn& turn : turns) OnTurnClassified(turn);
  return absl::OkStatus();
}

}  // namespace cachewatch
