// The Prometheus turn metrics (docs/METRICS.md), a TurnExporter: turns and
// breaks by agent, provider, model and reason, cache tokens and hit ratio.
// Every metric is registered at construction in the registry given (shared
// with the daemon's telemetry, daemon/telemetry); an Exposer (exposer.h)
// serves it on /metrics. Export() only updates counters: it never blocks.
//
// Label cardinality is bounded: each of the labels agent, provider, model and
// reason keeps its first MetricsOptions::max_label_values distinct values and
// reports every later one as "other" (an empty value as "unknown"); each turn
// (for reason: each break) reported as "other" is counted in
// cachewatch_label_overflow_total{label}.
//
// No method throws. Thread-safe: every method may be called concurrently from
// any number of threads without external synchronization.
#ifndef CACHEWATCH_DAEMON_EXPORTER_PROMETHEUS_TURN_METRICS_H_
#define CACHEWATCH_DAEMON_EXPORTER_PROMETHEUS_TURN_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/labels.h>
#include <prometheus/registry.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "cachewatch/v1/break.pb.h"
#include "daemon/core/lane_tracker.h"
#include "daemon/exporter/prometheus/label_limiter.h"
#include "daemon/exporter/prometheus/label_tuple.h"
#include "daemon/exporter/turn_exporter.h"

namespace cachewatch {

struct MetricsOptions {
  // Distinct values kept per label (agent, provider, model, reason); further
  // values are reported as "other". Default 100.
  size_t max_label_values = 100;
  // Distinct label sets kept per kind of series (turns, breaks, break cost,
  // provider diagnostics); the label sets of later combinations are folded
  // into one whose every label is "other". Default 500.
  size_t max_series = 500;
};

class TurnMetrics final : public TurnExporter {
 public:
  // Registers every turn metric in `registry` (not null).
  TurnMetrics(const MetricsOptions& options,
              std::shared_ptr<prometheus::Registry> registry);

  TurnMetrics(const TurnMetrics&) = delete;
  TurnMetrics& operator=(const TurnMetrics&) = delete;

  // The registry holding every metric, for an Exposer and for tests. It stays
  // valid as long as the caller holds it.
  std::shared_ptr<prometheus::Registry> registry();

  // Counts a classified turn: its verdict, its cache tokens and hit ratio
  // (when it carries a usage) and, for a break, its primary reason, missed
  // tokens, estimated cost (when known) and the provider's agreement (when
  // the provider sent diagnostics). Turns with a verdict that is not final
  // (pending, unspecified) are ignored.
  void OnTurnClassified(const ClassifiedTurn& turn);

  // OnTurnClassified for each turn; always OK.
  absl::Status Export(const std::vector<ClassifiedTurn>& turns) override;

 private:
  static constexpr size_t kVerdicts = 5;  // cold_start .. below_min_cacheable

  // A label whose values are capped, with its overflow counter.
  struct CappedLabel {
    CappedLabel(size_t max_values, prometheus::Counter* overflow)
        : limiter(max_values), overflow(overflow) {}
    LabelLimiter limiter;
    prometheus::Counter* const overflow;
  };

  // The label names of a kind of series, in key order, and their caps: null
  // where a label is not capped or its value was already reported through
  // its limiter (so that each turn is limited, and counted as an overflow,
  // once per label).
  // `series_overflow` counts the turns (breaks) folded into the all-"other"
  // label set because the kind had reached MetricsOptions::max_series.
  template <size_t N>
  struct LabelSet {
    std::array<std::string_view, N> names;
    std::array<CappedLabel*, N> caps;
    prometheus::Counter* series_overflow;
  };

  // The series of one (agent, provider, model).
  struct TurnSeries {
    std::array<prometheus::Counter*, kVerdicts> turns;  // By verdict.
    prometheus::Counter* cache_read_tokens;
    prometheus::Counter* cache_write_tokens;
    prometheus::Counter* prompt_tokens;
    prometheus::Histogram* hit_ratio;
  };

  // The series of one (agent, provider, model, reason).
  struct BreakSeries {
    prometheus::Counter* breaks;
    prometheus::Counter* lost_tokens;
  };

  // Returns the reported label values (capped labels reported through their
  // limiter) and the series for the label values `raw`, made by `make` from
  // the reported labels on first use. Both live as long as this object and
  // never change.
  template <size_t N, typename Series, typename Make>
  const std::pair<const LabelTuple<N>, Series>& FindOrCreate(
      LabelTupleMap<N, Series>& map, const LabelSet<N>& labels,
      const LabelTupleView<N>& raw, const Make& make);

  std::string_view ReasonLabel(v1::Reason reason) const;

  const size_t max_series_;
  const std::shared_ptr<prometheus::Registry> registry_;

  prometheus::Family<prometheus::Counter>& turns_;
  prometheus::Family<prometheus::Counter>& breaks_;
  prometheus::Family<prometheus::Counter>& cache_read_tokens_;
  prometheus::Family<prometheus::Counter>& cache_write_tokens_;
  prometheus::Family<prometheus::Counter>& prompt_tokens_;
  prometheus::Family<prometheus::Counter>& cache_lost_tokens_;
  prometheus::Family<prometheus::Histogram>& hit_ratio_;
  prometheus::Family<prometheus::Counter>& break_cost_;
  prometheus::Family<prometheus::Counter>& provider_diagnostics_;
  prometheus::Family<prometheus::Counter>& label_overflow_;
  prometheus::Family<prometheus::Counter>& series_overflow_;

  CappedLabel agent_;
  CappedLabel provider_;
  CappedLabel model_;
  CappedLabel reason_;
  const LabelSet<3> turn_labels_;
  const LabelSet<4> break_labels_;        // Agent, provider, model: reported.
  const LabelSet<4> cost_labels_;         // All reported.
  const LabelSet<2> diagnostics_labels_;  // Provider reported; agreement fixed.

  // Primary reason labels, by v1::Reason value.
  std::array<std::string, v1::Reason_ARRAYSIZE> reason_names_;

  // Series by label values. Entries are never changed or removed, so they
  // may be used after the lock is released.
  std::shared_mutex mutex_;
  LabelTupleMap<3, TurnSeries> turn_series_;            // Guarded by mutex_.
  LabelTupleMap<4, BreakSeries> break_series_;          // Guarded by mutex_.
  LabelTupleMap<4, prometheus::Counter*> cost_series_;  // Guarded by mutex_.
  // Keyed by (provider, agreement). Guarded by mutex_.
  LabelTupleMap<2, prometheus::Counter*> diagnostics_series_;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_EXPORTER_PROMETHEUS_TURN_METRICS_H_
