#include "daemon/receiver/proxy/lane_inference.h"

#include <cinttypes>
#include <cstdio>
#include <utility>

#include "cachewatch/client/hash.h"

namespace cachewatch {
namespace {

// The prefix of the names rule 6 gives.
constexpr std::string_view kInferred = "inferred-";
// The lane of a session rule 6 inferred.
constexpr std::string_view kInferredSessionLane = "main";

uint64_t ScopeOf(std::string_view agent, std::string_view session_id) {
  std::string key(agent);
  key.push_back('\0');
  key.append(session_id);
  return client::HashBytes(key);
}

uint64_t ScopeOf(const LaneRequest& request) {
  return ScopeOf(request.agent, request.session_id);
}

uint64_t FirstBlock(absl::Span<const uint64_t> chain) {
  return chain.empty() ? 0 : chain.front();
}

std::string Hex(uint64_t value, int digits) {
  char buffer[17];
  std::snprintf(buffer, sizeof(buffer), "%016" PRIx64, value);
  return std::string(buffer, static_cast<size_t>(digits));
}

}  // namespace

LaneInference::LaneInference(size_t max_lanes)
    : max_lanes_(max_lanes == 0 ? 1 : max_lanes) {}

std::pair<LaneInference::Heads::const_iterator, LaneRule> LaneInference::Find(
    const LaneRequest& request) const {
  const uint64_t scope = ScopeOf(request);
  const auto in_scope = [scope](const Head& head) {
    return head.scope == scope;
  };
  if (!request.lane.empty()) {
    for (auto it = heads_.begin(); it != heads_.end(); ++it) {
      if (in_scope(*it) && it->lane == request.lane) {
        return {it, LaneRule::kExplicit};
      }
    }
    return {heads_.end(), LaneRule::kExplicit};
  }
  if (!request.previous_response_id.empty()) {
    for (auto it = heads_.begin(); it != heads_.end(); ++it) {
      if (in_scope(*it) &&
          it->last_response_id == request.previous_response_id) {
        return {it, LaneRule::kPreviousResponse};
      }
    }
  }
  const absl::Span<const uint64_t> chain = request.message_chain;
  auto longest = heads_.end();
  for (auto it = heads_.begin(); it != heads_.end(); ++it) {
    if (!in_scope(*it) || it->length == 0 || it->length > chain.size() ||
        chain[it->length - 1] != it->last_block) {
      continue;
    }
    if (longest == heads_.end() || it->length > longest->length) longest = it;
  }
  if (longest != heads_.end()) return {longest, LaneRule::kExtends};
  for (auto it = heads_.begin(); it != heads_.end(); ++it) {
    if (!in_scope(*it) || it->prefix_identity != request.prefix_identity) {
      continue;
    }
    if (request.compaction_marker) return {it, LaneRule::kCompaction};
    if (it->first_block == FirstBlock(chain)) {
      return {it, LaneRule::kEditedHistory};
    }
  }
  return {heads_.end(), LaneRule::kNew};
}

std::string LaneInference::Unused(uint64_t scope, const std::string& base,
                                  bool session) const {
  std::string name = base;
  for (int suffix = 2;; ++suffix) {
    bool taken = false;
    for (const Head& head : heads_) {
      if (head.scope == scope &&
          (session ? head.session_id : head.lane) == name) {
        taken = true;
        break;
      }
    }
    if (!taken) return name;
    name = base + "-" + std::to_string(suffix);
  }
}

LaneDecision LaneInference::Decide(const LaneRequest& request,
                                   Heads::const_iterator head,
                                   LaneRule rule) const {
  LaneDecision decision;
  decision.rule = rule;
  if (head != heads_.end()) {
    decision.session_id = head->session_id;
    decision.lane = head->lane;
    decision.previous_response_id = head->last_response_id;
    return decision;
  }
  const uint64_t scope = ScopeOf(request);
  const uint64_t fingerprint = client::HashBytes(
      std::string_view(reinterpret_cast<const char*>(&request.prefix_identity),
                       sizeof(request.prefix_identity)));
  const uint64_t first = FirstBlock(request.message_chain);
  const uint64_t name_hash = fingerprint ^ (first * 0x9E3779B97F4A7C15ull);
  if (!request.session_id.empty()) {
    decision.session_id = std::string(request.session_id);
  } else {
    decision.session_id =
        Unused(scope, std::string(kInferred) + Hex(name_hash, 12),
               /*session=*/true);
  }
  if (!request.lane.empty()) {
    decision.lane = std::string(request.lane);
  } else if (!request.session_id.empty()) {
    decision.lane = Unused(scope, std::string(kInferred) + Hex(name_hash, 8),
                           /*session=*/false);
  } else {
    decision.lane = std::string(kInferredSessionLane);  // One per session.
  }
  return decision;
}

LaneDecision LaneInference::Peek(const LaneRequest& request) const {
  const auto [head, rule] = Find(request);
  return Decide(request, head, rule);
}

LaneDecision LaneInference::Assign(const LaneRequest& request,
                                   std::string_view response_id) {
  const auto [head, rule] = Find(request);
  LaneDecision decision = Decide(request, head, rule);
  Head updated;
  if (head != heads_.end()) {
    updated = *head;
    heads_.erase(head);
  } else {
    updated.scope = ScopeOf(request);
    updated.session_id = decision.session_id;
    updated.lane = decision.lane;
  }
  const absl::Span<const uint64_t> chain = request.message_chain;
  updated.prefix_identity = request.prefix_identity;
  updated.first_block = FirstBlock(chain);
  updated.length = chain.size();
  updated.last_block = chain.empty() ? 0 : chain.back();
  if (!response_id.empty()) updated.last_response_id = std::string(response_id);
  heads_.push_front(std::move(updated));
  while (heads_.size() > max_lanes_) heads_.pop_back();
  return decision;
}

void LaneInference::Restore(const StoredLaneHead& stored) {
  if (heads_.size() >= max_lanes_) return;
  const bool inferred_session = stored.session_id.starts_with(kInferred) &&
                                stored.lane == kInferredSessionLane;
  const uint64_t scope = ScopeOf(
      stored.agent, inferred_session ? std::string_view() : stored.session_id);
  for (const Head& head : heads_) {
    if (head.scope == scope && head.session_id == stored.session_id &&
        head.lane == stored.lane) {
      return;
    }
  }
  const absl::Span<const uint64_t> chain = stored.message_chain;
  heads_.push_back(
      Head{.scope = scope,
           .session_id = std::string(stored.session_id),
           .lane = std::string(stored.lane),
           .prefix_identity = stored.prefix_identity,
           .first_block = FirstBlock(chain),
           .length = chain.size(),
           .last_block = chain.empty() ? 0 : chain.back(),
           .last_response_id = std::string(stored.last_response_id)});
}

}  // namespace cachewatch
