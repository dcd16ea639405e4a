// Which lane a request the proxy saw belongs to, when the agent does not
// say (docs/PROXY.md, "Lanes"). The inference remembers, per lane, the head
// of its history: the length and last hash of the message chain it last
// sent, the first block's hash, its prefix identity (system and tools) and
// the provider's id of its last response. A request, within its scope (the
// agent and, when known, the session), goes to the first of:
//
//   1. explicit: the lane the request names (x-cachewatch-lane);
//   2. previous response: the lane whose last response id is the request's
//      previous_response_id (OpenAI Responses, context on the provider);
//   3. extends: the lane whose last chain the request's chain extends (or
//      repeats: a retry), the longest such chain winning;
//   4. compaction: the request's history opens with a compaction summary
//      (a marker, see ObservedRequest) — the most recent lane with the same
//      prefix identity, with a compaction hint (a new baseline);
//   5. edited history: the most recent lane with the same prefix identity
//      and the same first block (an edit or truncation further on, which the
//      daemon then reports);
//   6. a new lane: parallel subagents (another system, other tools or
//      another first message) and new conversations.
//
// Lanes beyond `max_lanes` are forgotten, least recently used first. Only
// hashes, names, counts and response ids are kept. The heads live in memory;
// after a restart Restore() gives them back from the lanes' stored last
// turns, so a lane's next request finds its lane as before.
//
// Not thread-safe: the caller serializes access.
#ifndef CACHEWATCH_DAEMON_RECEIVER_PROXY_LANE_INFERENCE_H_
#define CACHEWATCH_DAEMON_RECEIVER_PROXY_LANE_INFERENCE_H_

#include <cstddef>
#include <cstdint>
#include <list>
#include <string>
#include <string_view>

#include "absl/types/span.h"

namespace cachewatch {

struct LaneRequest {
  std::string_view agent;       // Required.
  std::string_view session_id;  // Empty: inferred (one per new lane).
  std::string_view lane;        // Empty: inferred.
  uint64_t prefix_identity = 0;
  absl::Span<const uint64_t> message_chain;
  bool compaction_marker = false;
  std::string_view previous_response_id;
};

// A lane as its last stored turn has it: what Restore() needs.
struct StoredLaneHead {
  std::string_view agent;
  std::string_view session_id;
  std::string_view lane;
  uint64_t prefix_identity = 0;
  absl::Span<const uint64_t> message_chain;
  // The last turn's request id: the provider's response id for the turns
  // the proxy observed.
  std::string_view last_response_id;
};

enum class LaneRule {
  kExplicit,
  kPreviousResponse,
  kExtends,
  kCompaction,
  kEditedHistory,
  kNew,
};

struct LaneDecision {
  std::string session_id;
  std::string lane;
  LaneRule rule = LaneRule::kNew;
  // The provider's id of the lane's last answered response; empty when the
  // lane is new or none was seen.
  std::string previous_response_id;
};

class LaneInference {
 public:
  explicit LaneInference(size_t max_lanes);

  // The lane of `request`; remembers nothing.
  LaneDecision Peek(const LaneRequest& request) const;

  // The lane of `request`, which the provider answered with `response_id`
  // (empty when it carried none): the lane's head becomes this request.
  LaneDecision Assign(const LaneRequest& request, std::string_view response_id);

  // Remembers `head` as the least recently used lane, unless a lane of its
  // scope with its session and name is remembered already or `max_lanes`
  // are: call it with the lanes most recently used first. A session named
  // `inferred-...` with the lane `main` was inferred (rule 6 without a
  // session), so its scope is the agent alone, as for its requests.
  void Restore(const StoredLaneHead& head);

  // Lanes remembered.
  size_t size() const { return heads_.size(); }

 private:
  struct Head {
    uint64_t scope;
    std::string session_id;
    std::string lane;
    uint64_t prefix_identity;
    uint64_t first_block;
    size_t length;
    uint64_t last_block;
    std::string last_response_id;
  };
  using Heads = std::list<Head>;  // Most recently used first.

  // The head `request` continues (heads_.end() for a new lane) and the rule.
  std::pair<Heads::const_iterator, LaneRule> Find(
      const LaneRequest& request) const;
  LaneDecision Decide(const LaneRequest& request, Heads::const_iterator head,
                      LaneRule rule) const;
  // A name of the form `base`, `base`-2, ... that no head of `scope` has
  // in `field` (lane or, for inferred sessions, session).
  std::string Unused(uint64_t scope, const std::string& base,
                     bool session) const;

  size_t max_lanes_;
  Heads heads_;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_RECEIVER_PROXY_LANE_INFERENCE_H_
