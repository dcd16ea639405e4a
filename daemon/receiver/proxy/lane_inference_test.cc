#include "daemon/receiver/proxy/lane_inference.h"

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace cachewatch {
namespace {

// A request of "agent" with a message chain and a prefix identity.
struct Req {
  Req(std::vector<uint64_t> chain_in, uint64_t identity_in = 1,
      std::string session_in = "", std::string lane_in = "")
      : chain(std::move(chain_in)),
        identity(identity_in),
        session(std::move(session_in)),
        lane(std::move(lane_in)) {}

  std::vector<uint64_t> chain;
  uint64_t identity;
  std::string session;
  std::string lane;
  bool compaction = false;
  std::string previous;

  LaneRequest Get() const {
    LaneRequest request;
    request.agent = "agent";
    request.session_id = session;
    request.lane = lane;
    request.prefix_identity = identity;
    request.message_chain = chain;
    request.compaction_marker = compaction;
    request.previous_response_id = previous;
    return request;
  }
};

TEST(LaneInferenceTest, ExtendingTheChainContinuesTheLane) {
  LaneInference lanes(100);
  const LaneDecision first = lanes.Assign(Req{{1, 2}}.Get(), "msg_1");
  EXPECT_EQ(first.rule, LaneRule::kNew);
  EXPECT_EQ(first.lane, "main");
  EXPECT_EQ(first.session_id.rfind("inferred-", 0), 0u);
  EXPECT_TRUE(first.previous_response_id.empty());

  const LaneDecision second = lanes.Assign(Req{{1, 2, 3, 4}}.Get(), "msg_2");
  EXPECT_EQ(second.rule, LaneRule::kExtends);
  EXPECT_EQ(second.session_id, first.session_id);
  EXPECT_EQ(second.previous_response_id, "msg_1");

  // A retry repeats the chain: the same lane.
  const LaneDecision retry = lanes.Assign(Req{{1, 2, 3, 4}}.Get(), "msg_3");
  EXPECT_EQ(retry.rule, LaneRule::kExtends);
  EXPECT_EQ(retry.session_id, first.session_id);
  EXPECT_EQ(lanes.size(), 1u);
}

TEST(LaneInferenceTest, LongestExtendedChainWins) {
  LaneInference lanes(100);
  const LaneDecision short_lane = lanes.Assign(Req{{1}, 1}.Get(), "a");
  const LaneDecision long_lane = lanes.Assign(Req{{1, 2, 3}, 2}.Get(), "b");
  EXPECT_EQ(long_lane.rule, LaneRule::kExtends);  // Extends the first...
  // ...so it is the same lane. A parallel one that shares only block 1:
  const LaneDecision fork = lanes.Assign(Req{{1, 9}, 3}.Get(), "c");
  EXPECT_EQ(fork.rule, LaneRule::kNew);
  EXPECT_NE(fork.session_id, short_lane.session_id);
  // Extends both the fork's chain [1, 9] and nothing else: the fork's lane.
  EXPECT_EQ(lanes.Assign(Req{{1, 9, 10}, 3}.Get(), "d").session_id,
            fork.session_id);
  EXPECT_EQ(lanes.Assign(Req{{1, 2, 3, 4}, 2}.Get(), "e").session_id,
            short_lane.session_id);
}

TEST(LaneInferenceTest, ParallelSubagentsGetLanesOfTheirOwn) {
  LaneInference lanes(100);
  Req main{{10, 11}, /*identity=*/1, "session-1"};
  Req explore{{20}, /*identity=*/2, "session-1"};    // Other system/tools.
  Req same_type{{30}, /*identity=*/2, "session-1"};  // Other first message.
  const LaneDecision a = lanes.Assign(main.Get(), "m1");
  const LaneDecision b = lanes.Assign(explore.Get(), "e1");
  const LaneDecision c = lanes.Assign(same_type.Get(), "s1");
  EXPECT_EQ(a.session_id, "session-1");
  EXPECT_EQ(b.session_id, "session-1");
  EXPECT_EQ(a.rule, LaneRule::kNew);
  EXPECT_EQ(b.rule, LaneRule::kNew);
  EXPECT_EQ(c.rule, LaneRule::kNew);
  EXPECT_NE(a.lane, b.lane);
  EXPECT_NE(b.lane, c.lane);
  EXPECT_EQ(a.lane.rfind("inferred-", 0), 0u);
  // Interleaved turns each continue their own lane.
  main.chain.push_back(12);
  explore.chain.push_back(21);
  same_type.chain.push_back(31);
  EXPECT_EQ(lanes.Assign(explore.Get(), "e2").lane, b.lane);
  EXPECT_EQ(lanes.Assign(main.Get(), "m2").lane, a.lane);
  EXPECT_EQ(lanes.Assign(same_type.Get(), "s2").lane, c.lane);
  EXPECT_EQ(lanes.size(), 3u);
}

TEST(LaneInferenceTest, IdenticalNewLanesGetDistinctNames) {
  LaneInference lanes(100);
  // Parallel requests of one subagent type: the same identity, other first
  // messages.
  const LaneDecision a = lanes.Assign(Req{{5}, 1, "s"}.Get(), "1");
  const LaneDecision b = lanes.Assign(Req{{6}, 1, "s"}.Get(), "2");
  EXPECT_EQ(b.rule, LaneRule::kNew);
  EXPECT_NE(a.lane, b.lane);
}

TEST(LaneInferenceTest, CompactionContinuesTheLaneWithAHint) {
  LaneInference lanes(100);
  const LaneDecision before = lanes.Assign(Req{{1, 2, 3, 4, 5}}.Get(), "m1");
  Req summary{{99}};
  summary.compaction = true;
  const LaneDecision after = lanes.Assign(summary.Get(), "m2");
  EXPECT_EQ(after.rule, LaneRule::kCompaction);
  EXPECT_EQ(after.session_id, before.session_id);
  EXPECT_EQ(after.previous_response_id, "m1");
  // The new baseline: the next turn extends the compacted history.
  EXPECT_EQ(lanes.Assign(Req{{99, 100}}.Get(), "m3").rule, LaneRule::kExtends);
  EXPECT_EQ(lanes.size(), 1u);
}

TEST(LaneInferenceTest, CompactionNeedsTheSamePrefixIdentity) {
  LaneInference lanes(100);
  lanes.Assign(Req{{1, 2, 3}, 1}.Get(), "m1");
  Req summary{{99}, /*identity=*/7};
  summary.compaction = true;
  EXPECT_EQ(lanes.Assign(summary.Get(), "x").rule, LaneRule::kNew);
}

TEST(LaneInferenceTest, EditedHistoryStaysOnItsLane) {
  LaneInference lanes(100);
  const LaneDecision before = lanes.Assign(Req{{1, 2, 3}}.Get(), "m1");
  // Block 2 was edited: the chain diverges after the first block.
  const LaneDecision edited = lanes.Assign(Req{{1, 7, 8, 9}}.Get(), "m2");
  EXPECT_EQ(edited.rule, LaneRule::kEditedHistory);
  EXPECT_EQ(edited.session_id, before.session_id);
  // Truncated history (a prefix of the last chain) too.
  const LaneDecision truncated = lanes.Assign(Req{{1}}.Get(), "m3");
  EXPECT_EQ(truncated.rule, LaneRule::kEditedHistory);
  EXPECT_EQ(truncated.session_id, before.session_id);
}

TEST(LaneInferenceTest, ChangedSystemPromptStillExtendsTheLane) {
  LaneInference lanes(100);
  const LaneDecision before = lanes.Assign(Req{{1, 2}, 1}.Get(), "m1");
  const LaneDecision after = lanes.Assign(Req{{1, 2, 3}, 2}.Get(), "m2");
  EXPECT_EQ(after.rule, LaneRule::kExtends);
  EXPECT_EQ(after.session_id, before.session_id);
}

TEST(LaneInferenceTest, PreviousResponseIdContinuesTheLane) {
  LaneInference lanes(100);
  const LaneDecision first = lanes.Assign(Req{{}, 1, "s"}.Get(), "resp_1");
  Req next{{}, 1, "s"};
  next.previous = "resp_1";
  next.chain = {42};  // Only the new input: it extends nothing.
  const LaneDecision second = lanes.Assign(next.Get(), "resp_2");
  EXPECT_EQ(second.rule, LaneRule::kPreviousResponse);
  EXPECT_EQ(second.lane, first.lane);
  EXPECT_EQ(second.previous_response_id, "resp_1");
}

TEST(LaneInferenceTest, ExplicitLaneAndSession) {
  LaneInference lanes(100);
  Req named{{1}, 1, "s", "planner"};
  const LaneDecision first = lanes.Assign(named.Get(), "m1");
  EXPECT_EQ(first.rule, LaneRule::kExplicit);
  EXPECT_EQ(first.session_id, "s");
  EXPECT_EQ(first.lane, "planner");
  // Another chain entirely: still the lane it names.
  Req again{{50}, 9, "s", "planner"};
  const LaneDecision second = lanes.Assign(again.Get(), "m2");
  EXPECT_EQ(second.lane, "planner");
  EXPECT_EQ(second.previous_response_id, "m1");
}

TEST(LaneInferenceTest, SessionsAreSeparateScopes) {
  LaneInference lanes(100);
  lanes.Assign(Req{{1, 2}, 1, "s1"}.Get(), "a");
  const LaneDecision other = lanes.Assign(Req{{1, 2, 3}, 1, "s2"}.Get(), "b");
  EXPECT_EQ(other.rule, LaneRule::kNew);
  EXPECT_EQ(other.session_id, "s2");
}

TEST(LaneInferenceTest, PeekRemembersNothing) {
  LaneInference lanes(100);
  lanes.Assign(Req{{1}}.Get(), "m1");
  const LaneDecision peeked = lanes.Peek(Req{{1, 2}}.Get());
  EXPECT_EQ(peeked.previous_response_id, "m1");
  EXPECT_EQ(lanes.Peek(Req{{1, 2}}.Get()).previous_response_id, "m1");
  EXPECT_EQ(lanes.size(), 1u);
  EXPECT_EQ(lanes.Peek(Req{{8}, 8}.Get()).rule, LaneRule::kNew);
  EXPECT_EQ(lanes.size(), 1u);
}

TEST(LaneInferenceTest, LeastRecentlyUsedLanesAreForgotten) {
  LaneInference lanes(2);
  const LaneDecision a = lanes.Assign(Req{{1}, 1}.Get(), "a");
  lanes.Assign(Req{{2}, 2}.Get(), "b");
  lanes.Assign(Req{{1, 10}, 1}.Get(), "a2");  // a is used again.
  lanes.Assign(Req{{3}, 3}.Get(), "c");       // b is forgotten.
  EXPECT_EQ(lanes.size(), 2u);
  EXPECT_EQ(lanes.Peek(Req{{1, 10, 11}, 1}.Get()).session_id, a.session_id);
  EXPECT_EQ(lanes.Peek(Req{{2, 20}, 2}.Get()).rule, LaneRule::kNew);
}

// What a store keeps of a lane: its last request, by the lane it went to.
struct StoredLast {
  LaneDecision decision;
  Req request;
  std::string response_id;
};

// Assigns `request` on `lanes` and keeps it as its lane's last stored turn
// (most recent first, as RestoreLanes orders them).
void AssignAndStore(LaneInference& lanes, const Req& request,
                    const std::string& response_id,
                    std::vector<StoredLast>& stored) {
  LaneDecision decision = lanes.Assign(request.Get(), response_id);
  std::erase_if(stored, [&decision](const StoredLast& last) {
    return last.decision.session_id == decision.session_id &&
           last.decision.lane == decision.lane;
  });
  stored.insert(stored.begin(),
                StoredLast{std::move(decision), request, response_id});
}

void RestoreAll(LaneInference& lanes, const std::vector<StoredLast>& stored) {
  for (const StoredLast& last : stored) {
    lanes.Restore(StoredLaneHead{.agent = "agent",
                                 .session_id = last.decision.session_id,
                                 .lane = last.decision.lane,
                                 .prefix_identity = last.request.identity,
                                 .message_chain = last.request.chain,
                                 .last_response_id = last.response_id});
  }
}

TEST(LaneInferenceRestoreTest, RestoredHeadsDecideAsIfThereWasNoRestart) {
  LaneInference running(100);
  std::vector<StoredLast> stored;
  // An inferred session (no session id), a known session with two parallel
  // subagents of one type (the second named -2), and a Responses lane.
  AssignAndStore(running, Req{{1, 2}, 1}, "m1", stored);
  AssignAndStore(running, Req{{1, 2, 3, 4}, 1}, "m2", stored);
  AssignAndStore(running, Req{{10}, 5, "s"}, "m3", stored);
  AssignAndStore(running, Req{{11}, 5, "s"}, "m4", stored);
  AssignAndStore(running, Req{{11, 12}, 5, "s"}, "m5", stored);
  AssignAndStore(running, Req{{20}, 6, "r"}, "resp_1", stored);
  ASSERT_EQ(stored.size(), 4u);

  LaneInference restarted(100);
  RestoreAll(restarted, stored);
  EXPECT_EQ(restarted.size(), 4u);

  Req changed_system{{1, 2, 3, 4, 5, 6}, /*identity=*/9};  // Extends.
  Req edited{{1, 7}, 1};                                   // Same first block.
  Req compaction{{30}, 5, "s"};
  compaction.compaction = true;
  Req responses{{}, 6, "r"};
  responses.previous = "resp_1";
  Req subagent_again{{11, 12, 13}, 5, "s"};
  Req third_subagent{{10}, 5, "s"};  // Same as the first: its name is taken.
  for (const Req& next : {changed_system, edited, compaction, responses,
                          subagent_again, third_subagent}) {
    const LaneDecision want = running.Peek(next.Get());
    const LaneDecision got = restarted.Peek(next.Get());
    EXPECT_EQ(got.rule, want.rule);
    EXPECT_EQ(got.session_id, want.session_id);
    EXPECT_EQ(got.lane, want.lane);
    EXPECT_EQ(got.previous_response_id, want.previous_response_id);
  }
  // Without the restore the changed system prompt starts a new lane.
  LaneInference forgotten(100);
  EXPECT_EQ(forgotten.Peek(changed_system.Get()).rule, LaneRule::kNew);
  EXPECT_EQ(restarted.Peek(changed_system.Get()).rule, LaneRule::kExtends);
}

TEST(LaneInferenceRestoreTest,
     AGivenSessionNamedLikeAnInferredOneKeepsItsScope) {
  LaneInference lanes(100);
  // "inferred-x" with a lane other than main came from a request's session.
  lanes.Restore(StoredLaneHead{.agent = "agent",
                               .session_id = "inferred-x",
                               .lane = "lane-1",
                               .prefix_identity = 1,
                               .message_chain = std::vector<uint64_t>{1, 2},
                               .last_response_id = {}});
  EXPECT_EQ(lanes.Peek(Req{{1, 2, 3}, 1}.Get()).rule, LaneRule::kNew);
  const LaneDecision in_session =
      lanes.Peek(Req{{1, 2, 3}, 1, "inferred-x"}.Get());
  EXPECT_EQ(in_session.rule, LaneRule::kExtends);
  EXPECT_EQ(in_session.lane, "lane-1");
}

TEST(LaneInferenceRestoreTest, RestoreKeepsWhatIsRememberedAndTheCap) {
  LaneInference lanes(2);
  const LaneDecision live = lanes.Assign(Req{{1, 2}, 1, "s"}.Get(), "m1");
  const std::vector<uint64_t> older_chain{1};
  // An older stored head of the same lane does not replace the live one.
  lanes.Restore(StoredLaneHead{.agent = "agent",
                               .session_id = "s",
                               .lane = live.lane,
                               .prefix_identity = 1,
                               .message_chain = older_chain,
                               .last_response_id = "m0"});
  EXPECT_EQ(lanes.size(), 1u);
  EXPECT_EQ(lanes.Peek(Req{{1, 2, 3}, 1, "s"}.Get()).previous_response_id,
            "m1");
  const std::vector<uint64_t> chain_b{20};
  const std::vector<uint64_t> chain_c{30};
  lanes.Restore(StoredLaneHead{.agent = "agent",
                               .session_id = "s",
                               .lane = "b",
                               .prefix_identity = 2,
                               .message_chain = chain_b,
                               .last_response_id = {}});
  lanes.Restore(StoredLaneHead{.agent = "agent",
                               .session_id = "s",
                               .lane = "c",
                               .prefix_identity = 3,
                               .message_chain = chain_c,
                               .last_response_id = {}});
  EXPECT_EQ(lanes.size(), 2u);  // "c" is beyond the cap.
  EXPECT_EQ(lanes.Peek(Req{{20, 21}, 2, "s"}.Get()).lane, "b");
  EXPECT_EQ(lanes.Peek(Req{{30, 31}, 3, "s"}.Get()).rule, LaneRule::kNew);
}

}  // namespace
}  // namespace cachewatch
