// Builders for the daemon's Prometheus metric families (the turn metrics and
// the daemon's own telemetry share them). They throw only on invalid names,
// and every name passed is a constant.
#ifndef CACHEWATCH_DAEMON_TELEMETRY_METRIC_FAMILIES_H_
#define CACHEWATCH_DAEMON_TELEMETRY_METRIC_FAMILIES_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <array>
#include <cstddef>
#include <string>

namespace cachewatch {

inline prometheus::Family<prometheus::Counter>& CounterFamily(
    prometheus::Registry& registry, const std::string& name,
    const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}

inline prometheus::Family<prometheus::Gauge>& GaugeFamily(
    prometheus::Registry& registry, const std::string& name,
    const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry);
}

inline prometheus::Family<prometheus::Histogram>& HistogramFamily(
    prometheus::Registry& registry, const std::string& name,
    const std::string& help) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(registry);
}

template <size_t N>
prometheus::Histogram::BucketBoundaries Buckets(
    const std::array<double, N>& bounds) {
  return prometheus::Histogram::BucketBoundaries(bounds.begin(), bounds.end());
}

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_TELEMETRY_METRIC_FAMILIES_H_
