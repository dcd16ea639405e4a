// Fixed-size tuples of label values as hash-map keys. A map keyed by
// LabelTuple<N> can be searched with a LabelTupleView<N> (heterogeneous
// lookup), so finding a series costs no copy of its label values.
//
// Plain values; thread-compatible.
#ifndef CACHEWATCH_DAEMON_EXPORTER_PROMETHEUS_LABEL_TUPLE_H_
#define CACHEWATCH_DAEMON_EXPORTER_PROMETHEUS_LABEL_TUPLE_H_

#include <array>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace cachewatch {

template <size_t N>
using LabelTuple = std::array<std::string, N>;

template <size_t N>
using LabelTupleView = std::array<std::string_view, N>;

struct LabelTupleHash {
  using is_transparent = void;

  template <typename String, size_t N>
  size_t operator()(const std::array<String, N>& values) const {
    size_t hash = N;
    for (std::string_view value : values) {
      // boost::hash_combine's mixing step.
      hash ^= std::hash<std::string_view>()(value) + 0x9e3779b97f4a7c15ULL +
              (hash << 6) + (hash >> 2);
    }
    return hash;
  }
};

struct LabelTupleEqual {
  using is_transparent = void;

  template <typename A, typename B, size_t N>
  bool operator()(const std::array<A, N>& a, const std::array<B, N>& b) const {
    for (size_t i = 0; i < N; ++i) {
      if (std::string_view(a[i]) != std::string_view(b[i])) return false;
    }
    return true;
  }
};

template <size_t N, typename Value>
using LabelTupleMap =
    std::unordered_map<LabelTuple<N>, Value, LabelTupleHash, LabelTupleEqual>;

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_EXPORTER_PROMETHEUS_LABEL_TUPLE_H_
