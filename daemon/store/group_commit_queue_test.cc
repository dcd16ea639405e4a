// The group commit queue's own logic, with a fake committer (the stores'
// tests cover it with their real commits): followers wait for their
// leader's commit and get its status, batch bounds, back-pressure,
// closing, refused units, asynchronous writes answered through their
// callbacks, and no write lost or doubled under many threads.
#include "daemon/store/group_commit_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/store/stale_lanes.h"

namespace cachewatch {
namespace {

// `count` records, each a usage with request id "<prefix>-<i>".
std::vector<StoreWrite> Records(const std::string& prefix, int count) {
  std::vector<StoreWrite> writes;
  for (int i = 0; i < count; ++i) {
    UsageWrite usage;
    usage.key = LaneKey{"agent", "session", "main"};
    usage.usage.set_request_id(absl::StrCat(prefix, "-", i));
    writes.emplace_back(std::move(usage));
  }
  return writes;
}

std::string IdOf(const StoreWrite& write) {
  return std::get<UsageWrite>(write).usage.request_id();
}

size_t RecordsOf(const std::vector<GroupCommitQueue::Unit>& batch) {
  size_t records = 0;
  for (const GroupCommitQueue::Unit& unit : batch) {
    records += unit.writes->size();
  }
  return records;
}

// A committer that holds each commit until the test lets it go, and answers
// with the status the test set.
class GatedCommitter {
 public:
  absl::Status Commit(std::vector<GroupCommitQueue::Unit>& batch) {
    std::unique_lock<std::mutex> lock(mu_);
    batches_.push_back(RecordsOf(batch));
    units_.push_back(batch.size());
    changed_.notify_all();
    changed_.wait(lock, [this] { return released_ >= batches_.size(); });
    return answer_;
  }

  // Blocks until the committer holds its `n`th batch (1-based).
  void AwaitBatch(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait(lock, [this, n] { return batches_.size() >= n; });
  }
  // Lets every batch up to the `n`th go, answering `answer`.
  void Release(size_t n, absl::Status answer = absl::OkStatus()) {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = n;
    answer_ = std::move(answer);
    changed_.notify_all();
  }
  std::vector<size_t> batches() {
    std::lock_guard<std::mutex> lock(mu_);
    return batches_;
  }
  std::vector<size_t> units() {
    std::lock_guard<std::mutex> lock(mu_);
    return units_;
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<size_t> batches_;  // Records of each batch, in order.
  std::vector<size_t> units_;    // Units of each batch, in order.
  size_t released_ = 0;
  absl::Status answer_;
};

GroupCommitQueue::Committer Gated(GatedCommitter& committer) {
  return [&committer](std::vector<GroupCommitQueue::Unit>& batch) {
    return committer.Commit(batch);
  };
}

// Blocks until `queue` holds `records` queued records.
void AwaitQueued(const GroupCommitQueue& queue, size_t records) {
  while (queue.queued_records() < records) std::this_thread::yield();
}

TEST(GroupCommitQueueTest, FollowersWaitForTheLeadersCommitAndGetItsStatus) {
  GatedCommitter committer;
  GroupCommitQueue queue(GroupCommitOptions{}, Gated(committer));
  std::atomic<int> returned{0};
  absl::Status first;
  std::thread leader([&] {
    first = queue.Write(Records("a", 1));
    ++returned;
  });
  committer.AwaitBatch(1);
  // Three writes queue up behind the commit in flight.
  std::vector<absl::Status> statuses(3);
  std::vector<std::thread> followers;
  followers.reserve(3);
  for (int i = 0; i < 3; ++i) {
    followers.emplace_back([&, i] {
      statuses[i] = queue.Write(Records(absl::StrCat("f", i), 1));
      ++returned;
    });
  }
  AwaitQueued(queue, 3);
  EXPECT_EQ(returned.load(), 0);  // The first commit is still in flight.
  committer.Release(1);
  leader.join();
  EXPECT_TRUE(first.ok()) << first;
  // The three share the next commit, led by one of them; none returns
  // before it is answered.
  committer.AwaitBatch(2);
  EXPECT_EQ(returned.load(), 1);
  committer.Release(2, absl::UnavailableError("disk on fire"));
  for (std::thread& follower : followers) follower.join();
  for (const absl::Status& status : statuses) {
    EXPECT_TRUE(absl::IsUnavailable(status)) << status;
    EXPECT_EQ(status.message(), "disk on fire");
  }
  EXPECT_EQ(committer.units(), (std::vector<size_t>{1, 3}));
  const StoreStats stats = queue.stats();
  EXPECT_EQ(stats.commits, 1);
  EXPECT_EQ(stats.committed_records, 1);
  EXPECT_EQ(stats.failed_commits, 1);
  EXPECT_TRUE(stats.last_commit_failed);
  EXPECT_NE(stats.last_error.find("disk on fire"), std::string::npos);
  EXPECT_EQ(stats.queued_records, 0u);
}

TEST(GroupCommitQueueTest, ABatchNeverExceedsMaxBatchRecordsNorSplitsAWrite) {
  GatedCommitter committer;
  GroupCommitOptions options;
  options.max_batch_records = 5;
  GroupCommitQueue queue(options, Gated(committer));
  std::vector<std::thread> writers;
  writers.reserve(8);  // GCC 12 -Warray-bounds: a false positive on growth.
  writers.emplace_back([&] { EXPECT_TRUE(queue.Write(Records("a", 1)).ok()); });
  committer.AwaitBatch(1);
  // Queued in this order behind the first commit: 2, 2, 2, 8, 1 records.
  const int sizes[] = {2, 2, 2, 8, 1};
  size_t queued = 0;
  for (int i = 0; i < 5; ++i) {
    queued += sizes[i];
    writers.emplace_back([&, i] {
      EXPECT_TRUE(queue.Write(Records(absl::StrCat("w", i), sizes[i])).ok());
    });
    AwaitQueued(queue, queued);  // Keeps the queue's order.
  }
  committer.Release(100);
  for (std::thread& writer : writers) writer.join();
  // 2+2 (a third 2 would pass 5), then 2 alone (8 would), the 8 alone
  // although larger than the bound, then the 1.
  EXPECT_EQ(committer.batches(), (std::vector<size_t>{1, 4, 2, 8, 1}));
  EXPECT_EQ(queue.stats().committed_records, 16);
  EXPECT_EQ(queue.stats().commits, 5);
}

TEST(GroupCommitQueueTest, ALeaderWaitsOutTheDelayForAFullBatch) {
  GatedCommitter committer;
  committer.Release(100);
  GroupCommitOptions options;
  options.max_batch_delay = std::chrono::hours(1);
  options.max_batch_records = 4;
  GroupCommitQueue queue(options, Gated(committer));
  std::vector<std::thread> writers;
  writers.reserve(8);
  for (int i = 0; i < 4; ++i) {
    writers.emplace_back([&, i] {
      EXPECT_TRUE(queue.Write(Records(absl::StrCat("w", i), 1)).ok());
    });
  }
  for (std::thread& writer : writers) writer.join();
  // No commit before the batch was full (the delay is an hour).
  EXPECT_EQ(committer.batches(), (std::vector<size_t>{4}));
}

TEST(GroupCommitQueueTest, AFullQueueAnswersResourceExhaustedNamingTheLimit) {
  GatedCommitter committer;
  GroupCommitOptions options;
  options.max_queued_records = 10;
  GroupCommitQueue queue(options, Gated(committer));
  std::vector<std::thread> writers;
  writers.reserve(8);
  writers.emplace_back([&] { EXPECT_TRUE(queue.Write(Records("a", 1)).ok()); });
  committer.AwaitBatch(1);  // Taken off the queue: 0 queued.
  for (int i = 0; i < 3; ++i) {
    writers.emplace_back([&, i] {
      EXPECT_TRUE(queue.Write(Records(absl::StrCat("w", i), 3)).ok());
    });
  }
  AwaitQueued(queue, 9);
  const absl::Status full = queue.Write(Records("full", 2));
  EXPECT_TRUE(absl::IsResourceExhausted(full)) << full;
  EXPECT_NE(full.message().find("9 records waiting"), std::string::npos)
      << full;
  EXPECT_NE(full.message().find("limit of 10 (--max-queued-records)"),
            std::string::npos)
      << full;
  EXPECT_EQ(queue.stats().rejected_records, 2);
  // One more record still fits.
  writers.emplace_back(
      [&] { EXPECT_TRUE(queue.Write(Records("fits", 1)).ok()); });
  AwaitQueued(queue, 10);
  committer.Release(100);
  for (std::thread& writer : writers) writer.join();
  EXPECT_EQ(queue.stats().committed_records, 11);
  EXPECT_EQ(queue.stats().rejected_records, 2);
}

TEST(GroupCommitQueueTest, ClosingRefusesNewWritesAndCommitsQueuedOnes) {
  GatedCommitter committer;
  committer.Release(100);
  GroupCommitOptions options;
  options.max_batch_delay = std::chrono::hours(1);
  GroupCommitQueue queue(options, Gated(committer));
  absl::Status queued;
  std::thread writer([&] { queued = queue.Write(Records("q", 1)); });
  AwaitQueued(queue, 1);
  queue.Close();
  // The queued write commits at once, without waiting out the hour.
  writer.join();
  EXPECT_TRUE(queued.ok()) << queued;
  const absl::Status refused = queue.Write(Records("late", 1));
  EXPECT_TRUE(absl::IsUnavailable(refused)) << refused;
  EXPECT_EQ(refused.message(), "store is closing");
  EXPECT_EQ(committer.batches(), (std::vector<size_t>{1}));
}

TEST(GroupCommitQueueTest, ARefusedUnitGetsItsOwnStatusAndIsNotCounted) {
  GatedCommitter gate;
  const LaneKey lane{"agent", "session", "stale"};
  // Refuses every unit whose first record is "stale-0".
  GroupCommitQueue queue(GroupCommitOptions{},
                         [&](std::vector<GroupCommitQueue::Unit>& batch) {
                           for (GroupCommitQueue::Unit& unit : batch) {
                             if (IdOf(unit.writes->front()) == "stale-0") {
                               unit.refused = StaleLanesError({lane});
                             }
                           }
                           return gate.Commit(batch);
                         });
  std::vector<std::thread> writers;
  writers.reserve(8);
  writers.emplace_back([&] { EXPECT_TRUE(queue.Write(Records("a", 1)).ok()); });
  gate.AwaitBatch(1);
  absl::Status stale;
  absl::Status fresh;
  writers.emplace_back([&] { stale = queue.Write(Records("stale", 2)); });
  AwaitQueued(queue, 2);
  writers.emplace_back([&] { fresh = queue.Write(Records("fresh", 3)); });
  AwaitQueued(queue, 5);
  gate.Release(100);
  for (std::thread& writer : writers) writer.join();
  EXPECT_TRUE(fresh.ok()) << fresh;
  EXPECT_TRUE(absl::IsAborted(stale)) << stale;
  EXPECT_EQ(StaleLanesOf(stale), std::vector<LaneKey>{lane});  // Payload kept.
  EXPECT_EQ(gate.units(), (std::vector<size_t>{1, 2}));
  EXPECT_EQ(queue.stats().commits, 2);
  EXPECT_EQ(queue.stats().committed_records, 4);

  // A batch of refused units only is no commit.
  EXPECT_TRUE(absl::IsAborted(queue.Write(Records("stale", 1))));
  EXPECT_EQ(queue.stats().commits, 2);
  EXPECT_FALSE(queue.stats().last_commit_failed);
}

TEST(GroupCommitQueueTest, ForgetLastFailureClearsItUntilTheNextOne) {
  absl::Status answer = absl::UnavailableError("server gone");
  GroupCommitQueue queue(
      GroupCommitOptions{},
      [&](std::vector<GroupCommitQueue::Unit>&) { return answer; });
  EXPECT_TRUE(absl::IsUnavailable(queue.Write(Records("a", 1))));
  EXPECT_TRUE(queue.stats().last_commit_failed);
  queue.ForgetLastFailure();
  StoreStats stats = queue.stats();
  EXPECT_FALSE(stats.last_commit_failed);
  EXPECT_EQ(stats.failed_commits, 1);
  EXPECT_TRUE(absl::IsUnavailable(queue.Write(Records("b", 1))));
  EXPECT_TRUE(queue.stats().last_commit_failed);
  answer = absl::OkStatus();
  EXPECT_TRUE(queue.Write(Records("c", 1)).ok());
  stats = queue.stats();
  EXPECT_FALSE(stats.last_commit_failed);
  EXPECT_EQ(stats.failed_commits, 2);
  EXPECT_EQ(stats.committed_records, 1);
}

TEST(GroupCommitQueueTest, WaitForQueuedBatchLetsAQueuedBatchFinishFirst) {
  GatedCommitter committer;
  GroupCommitQueue queue(GroupCommitOptions{}, Gated(committer));
  queue.WaitForQueuedBatch();  // Nothing queued: returns at once.
  std::vector<std::thread> writers;
  writers.reserve(8);
  writers.emplace_back([&] { EXPECT_TRUE(queue.Write(Records("a", 1)).ok()); });
  committer.AwaitBatch(1);
  writers.emplace_back([&] { EXPECT_TRUE(queue.Write(Records("b", 1)).ok()); });
  AwaitQueued(queue, 1);
  std::atomic<bool> waited{false};
  std::thread maintenance([&] {
    queue.WaitForQueuedBatch();
    waited = true;
  });
  // (The waiter looks at the queue again when a batch ends: it may see b's
  // batch taken only once that one ends too.)
  committer.Release(100);
  maintenance.join();
  EXPECT_TRUE(waited.load());
  EXPECT_GE(queue.stats().commits, 1);  // Not before a batch finished.
  for (std::thread& writer : writers) writer.join();
}

// What a WriteAsync() callback was called with, and on which thread.
struct Answer {
  bool called = false;
  absl::Status status;
  std::thread::id thread;
};

GroupCommitQueue::Done Into(Answer& answer) {
  return [&answer](absl::Status status) {
    answer.called = true;
    answer.status = std::move(status);
    answer.thread = std::this_thread::get_id();
  };
}

TEST(GroupCommitQueueTest, AsyncWritesQueuedDuringACommitShareTheNextOne) {
  GatedCommitter committer;
  GroupCommitQueue queue(GroupCommitOptions{}, Gated(committer));
  std::thread::id leader_thread;
  absl::Status first;
  std::thread leader([&] {
    leader_thread = std::this_thread::get_id();
    first = queue.Write(Records("a", 1));
  });
  committer.AwaitBatch(1);
  // Three asynchronous writes queue up behind the commit in flight: each
  // WriteAsync() returns at once, on this thread, with no thread waiting.
  std::vector<Answer> answers(3);
  for (int i = 0; i < 3; ++i) {
    queue.WriteAsync(Records(absl::StrCat("f", i), 1), Into(answers[i]));
  }
  EXPECT_EQ(queue.queued_records(), 3u);
  for (const Answer& answer : answers) EXPECT_FALSE(answer.called);
  // The leader commits them in one batch after its own (no caller of theirs
  // sleeps to lead it), and answers them on its thread.
  committer.Release(1);
  committer.AwaitBatch(2);
  for (const Answer& answer : answers) EXPECT_FALSE(answer.called);
  committer.Release(2, absl::UnavailableError("disk on fire"));
  leader.join();
  EXPECT_TRUE(first.ok()) << first;
  for (const Answer& answer : answers) {
    EXPECT_TRUE(answer.called);
    EXPECT_TRUE(absl::IsUnavailable(answer.status)) << answer.status;
    EXPECT_EQ(answer.status.message(), "disk on fire");
    EXPECT_EQ(answer.thread, leader_thread);
  }
  EXPECT_EQ(committer.units(), (std::vector<size_t>{1, 3}));
  EXPECT_EQ(queue.stats().failed_commits, 1);
  EXPECT_EQ(queue.stats().queued_records, 0u);
}

TEST(GroupCommitQueueTest, AnAsyncWriteWithNoCommitInFlightLeadsOnItsThread) {
  int batches = 0;
  GroupCommitQueue queue(GroupCommitOptions{},
                         [&](std::vector<GroupCommitQueue::Unit>& batch) {
                           ++batches;
                           EXPECT_EQ(RecordsOf(batch), 2u);
                           return absl::OkStatus();
                         });
  Answer answer;
  queue.WriteAsync(Records("a", 2), Into(answer));
  // Committed and answered before WriteAsync() returned.
  EXPECT_TRUE(answer.called);
  EXPECT_TRUE(answer.status.ok()) << answer.status;
  EXPECT_EQ(answer.thread, std::this_thread::get_id());
  EXPECT_EQ(batches, 1);
  EXPECT_EQ(queue.stats().committed_records, 2);

  Answer empty;
  queue.WriteAsync({}, Into(empty));
  EXPECT_TRUE(empty.called);
  EXPECT_TRUE(empty.status.ok()) << empty.status;
  EXPECT_EQ(batches, 1);
}

TEST(GroupCommitQueueTest, AFullQueueOrAClosedOneRefusesAnAsyncWriteAtOnce) {
  GatedCommitter committer;
  GroupCommitOptions options;
  options.max_queued_records = 4;
  GroupCommitQueue queue(options, Gated(committer));
  std::thread leader([&] { EXPECT_TRUE(queue.Write(Records("a", 1)).ok()); });
  committer.AwaitBatch(1);
  Answer queued;
  queue.WriteAsync(Records("q", 3), Into(queued));
  Answer full;
  queue.WriteAsync(Records("full", 2), Into(full));
  // Refused before WriteAsync() returned, naming the limit; the first one
  // waits for the commit.
  EXPECT_FALSE(queued.called);
  EXPECT_TRUE(full.called);
  EXPECT_TRUE(absl::IsResourceExhausted(full.status)) << full.status;
  EXPECT_NE(full.status.message().find("limit of 4 (--max-queued-records)"),
            std::string::npos)
      << full.status;
  EXPECT_EQ(queue.stats().rejected_records, 2);
  EXPECT_EQ(queue.queued_records(), 3u);

  queue.Close();
  Answer closed;
  queue.WriteAsync(Records("late", 1), Into(closed));
  EXPECT_TRUE(closed.called);
  EXPECT_TRUE(absl::IsUnavailable(closed.status)) << closed.status;
  // What was queued before the close still commits.
  committer.Release(100);
  leader.join();
  EXPECT_TRUE(queued.called);
  EXPECT_TRUE(queued.status.ok()) << queued.status;
  EXPECT_EQ(queue.stats().committed_records, 4);
}

TEST(GroupCommitQueueTest, AWriteBehindAsyncOnesLeadsItsOwnBatch) {
  GatedCommitter committer;
  GroupCommitOptions options;
  options.max_batch_records = 2;
  GroupCommitQueue queue(options, Gated(committer));
  // An asynchronous write leads the first batch on a thread of its own.
  Answer first;
  std::thread async_leader(
      [&] { queue.WriteAsync(Records("a", 1), Into(first)); });
  committer.AwaitBatch(1);
  Answer second;
  queue.WriteAsync(Records("b", 2), Into(second));
  std::thread::id writer_thread;
  absl::Status written;
  std::thread writer([&] {
    writer_thread = std::this_thread::get_id();
    written = queue.Write(Records("c", 1));
  });
  AwaitQueued(queue, 3);
  Answer third;
  queue.WriteAsync(Records("d", 1), Into(third));
  committer.Release(100);
  async_leader.join();
  writer.join();
  // b (async, at the front) is led by the first leader; then c's caller,
  // at the front, leads c and d.
  EXPECT_EQ(committer.batches(), (std::vector<size_t>{1, 2, 2}));
  EXPECT_TRUE(first.called && second.called && third.called);
  EXPECT_TRUE(written.ok()) << written;
  EXPECT_EQ(third.thread, writer_thread);
  EXPECT_NE(second.thread, writer_thread);
  EXPECT_EQ(queue.stats().committed_records, 5);
}

TEST(GroupCommitQueueTest, ManyThreadsLoseAndDoubleNoWrite) {
  constexpr int kThreads = 8;
  constexpr int kWritesPerThread = 300;
  std::mutex mu;
  std::map<std::string, int> committed;  // Record id -> times committed.
  std::atomic<int> in_flight{0};
  std::atomic<int> overlapping{0};
  std::atomic<int> oversized{0};
  std::atomic<int> batches{0};
  GroupCommitOptions options;
  options.max_batch_records = 16;
  GroupCommitQueue queue(
      options, [&](std::vector<GroupCommitQueue::Unit>& batch) {
        if (in_flight.fetch_add(1) != 0) ++overlapping;
        const bool fail = batches.fetch_add(1) % 5 == 4;
        if (RecordsOf(batch) > 16) ++oversized;
        if (!fail) {
          std::lock_guard<std::mutex> lock(mu);
          for (const GroupCommitQueue::Unit& unit : batch) {
            for (const StoreWrite& write : *unit.writes) {
              ++committed[IdOf(write)];
            }
          }
        }
        in_flight.fetch_sub(1);
        return fail ? absl::UnavailableError("every fifth batch fails")
                    : absl::OkStatus();
      });
  std::vector<std::vector<std::string>> acked(kThreads);
  std::vector<std::vector<std::string>> failed(kThreads);
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kWritesPerThread; ++i) {
        const std::string prefix = absl::StrCat(t, "/", i);
        absl::Status status;
        if (t % 2 == 0) {
          status = queue.Write(Records(prefix, 1 + (t + i) % 3));
        } else {  // Half the threads write asynchronously.
          std::promise<absl::Status> answered;
          queue.WriteAsync(Records(prefix, 1 + (t + i) % 3),
                           [&answered](absl::Status answer) {
                             answered.set_value(std::move(answer));
                           });
          status = answered.get_future().get();
        }
        (status.ok() ? acked : failed)[t].push_back(prefix);
        if (!status.ok()) {
          EXPECT_TRUE(absl::IsUnavailable(status)) << status;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(overlapping.load(), 0);
  EXPECT_EQ(oversized.load(), 0);
  int64_t acked_records = 0;
  for (int t = 0; t < kThreads; ++t) {
    for (const std::string& prefix : acked[t]) {
      const int i = std::stoi(prefix.substr(prefix.find('/') + 1));
      for (int r = 0; r < 1 + (t + i) % 3; ++r) {
        EXPECT_EQ(committed[absl::StrCat(prefix, "-", r)], 1) << prefix;
        ++acked_records;
      }
    }
    for (const std::string& prefix : failed[t]) {
      EXPECT_EQ(committed.count(absl::StrCat(prefix, "-0")), 0u) << prefix;
    }
  }
  EXPECT_EQ(static_cast<int64_t>(committed.size()), acked_records);
  const StoreStats stats = queue.stats();
  EXPECT_EQ(stats.committed_records, acked_records);
  EXPECT_EQ(stats.commits + stats.failed_commits, batches.load());
  EXPECT_EQ(stats.queued_records, 0u);
}

}  // namespace
}  // namespace cachewatch
