#include "daemon/store/turn_merge.h"

#include <utility>
#include <variant>

#include "daemon/store/columns.h"

namespace cachewatch {

std::optional<size_t> TurnMerger::Add(const StoreWrite& write) {
  return std::visit([this](const auto& record) { return Add(record); }, write);
}

std::optional<size_t> TurnMerger::Add(const SnapshotWrite& write) {
  const std::string& request_id = write.snapshot->request_id();
  bool added = false;
  TurnState& state = StateOf(write.key, request_id, added);
  if (state.snapshot) return std::nullopt;  // The first one counts.
  state.snapshot = true;
  // Any record before it holds a usage or a classification, whose values
  // the snapshot's replace when applied after them.
  const size_t index = added || order_ == Order::kAsWritten
                           ? Start(state, write.key, request_id)
                           : state.last;
  turns_[index].snapshot = &write;
  return index;
}

std::optional<size_t> TurnMerger::Add(const UsageWrite& write) {
  const std::string& request_id = write.usage.request_id();
  bool added = false;
  TurnState& state = StateOf(write.key, request_id, added);
  if (state.usage) return std::nullopt;  // The first one counts.
  state.usage = true;
  // After a classification, the usage's response time would fill the
  // request time after the break's instead of before it.
  const size_t index = added || (order_ == Order::kAsWritten &&
                                 turns_[state.last].classification != nullptr)
                           ? Start(state, write.key, request_id)
                           : state.last;
  turns_[index].usage = &write;
  return index;
}

std::optional<size_t> TurnMerger::Add(const ClassificationWrite& write) {
  const bool pending = write.classification.verdict() == v1::VERDICT_PENDING;
  bool added = false;
  TurnState& state = StateOf(write.key, write.request_id, added);
  // Nothing replaces a final verdict, and a pending one replaces none.
  if (state.final_verdict || (pending && state.classification)) {
    return std::nullopt;
  }
  size_t index = state.last;
  if (added) {
    index = Start(state, write.key, write.request_id);
  } else if (order_ == Order::kAsWritten) {
    // A final verdict after a pending one: both fill an empty expected
    // drop in turn, so the pending one's must be none or the same.
    const ClassificationWrite* last = turns_[state.last].classification;
    if (last != nullptr &&
        last->classification.expected_drop() != v1::EXPECTED_DROP_UNSPECIFIED &&
        last->classification.expected_drop() !=
            write.classification.expected_drop()) {
      index = Start(state, write.key, write.request_id);
    }
  }
  state.classification = true;
  state.final_verdict = !pending;
  turns_[index].classification = &write;
  return index;
}

TurnMerger::TurnState& TurnMerger::StateOf(const LaneKey& key,
                                           const std::string& request_id,
                                           bool& added) {
  const std::string_view lane = LaneColumn(key);
  std::string id;
  id.reserve(key.agent.size() + key.session_id.size() + lane.size() +
             request_id.size() + 3);
  id += key.agent;
  id.push_back('\0');
  id += key.session_id;
  id.push_back('\0');
  id += lane;
  id.push_back('\0');
  id += request_id;
  auto [it, inserted] = states_.try_emplace(std::move(id));
  added = inserted;
  return it->second;
}

size_t TurnMerger::Start(TurnState& state, const LaneKey& key,
                         const std::string& request_id) {
  MergedTurn turn;
  turn.key = &key;
  turn.request_id = &request_id;
  turns_.push_back(turn);
  state.last = turns_.size() - 1;
  return state.last;
}

}  // namespace cachewatch
