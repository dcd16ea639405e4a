// The classifier: decides whether a completed turn is a prompt cache break
// and, if so, why (design §3).
//
// A turn is compared with the previous classified turn of its lane. The
// baseline is the expected reuse, min(what the previous turn left in the
// cache, this prompt's size); a turn is a break when the missed tokens reach
// both the absolute and the relative threshold. Reasons are listed in
// prompt-prefix order; the first is primary. All time comes from the
// client's timestamps in the turns.
//
// Pure function of its arguments; thread-safe.
#ifndef CACHEWATCH_DAEMON_CORE_CLASSIFIER_H_
#define CACHEWATCH_DAEMON_CORE_CLASSIFIER_H_

#include <cstdint>
#include <map>
#include <string>

#include "cachewatch/v1/break.pb.h"
#include "daemon/core/turn.h"

namespace cachewatch {

// Prices in USD per million tokens.
struct ModelPrice {
  double input = 0;
  double cache_write_5m = 0;
  double cache_write_1h = 0;
  double cache_read = 0;
};

struct ClassifierOptions {
  // A break needs at least this many missed tokens. Default 2,000.
  int64_t min_missed_tokens = 2000;
  // ... and at least this share of the expected reuse. Default 5%.
  double min_missed_ratio = 0.05;
  // TTL per provider where it should differ from the provider default.
  std::map<v1::Provider, uint32_t> default_ttl_seconds;
  // Prices by exact model id; breaks of other models carry no cost.
  std::map<std::string, ModelPrice> prices;
};

// What the lane knows beyond its previous turn.
struct LaneContext {
  // TTL last seen in a response's 5 m / 1 h write split; 0 if none yet.
  uint32_t observed_ttl_seconds = 0;
};

// Classifies `current` (which must carry a usage) against `previous`, the
// lane's previous classified turn, or null for the lane's first turn.
v1::TurnClassification Classify(const LaneKey& key, const Turn* previous,
                                const Turn& current, const LaneContext& context,
                                const ClassifierOptions& options);

// The TTL a response's write split shows (3600 when any 1 h write, 300 when
// any 5 m write), or 0 when it shows none.
uint32_t TtlFromWriteSplit(const v1::NormalizedUsage& usage);

// Whether the provider's own miss reason (Anthropic's cache_miss_reason
// vocabulary, or OpenAI Responses' prompt_cache_diagnostics outcome / miss
// reason) is consistent with `reason`; a provider's cache_hit disagrees with
// every break. Unknown vocabulary: UNSPECIFIED.
v1::ProviderAgreement AgreementWith(const std::string& provider_reason,
                                    v1::Reason reason);

// Lower-case reason name as the design spells it ("tools_order_changed").
std::string ReasonName(v1::Reason reason);

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_CORE_CLASSIFIER_H_
