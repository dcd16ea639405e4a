#include "daemon/receiver/grpc/snapshot_pool.h"

#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

namespace cachewatch {
namespace {

TEST(SnapshotPoolTest, AReleasedSnapshotIsClearedAndHandedOutAgain) {
  SnapshotPool pool;
  std::shared_ptr<v1::Snapshot> first = pool.Acquire();
  first->set_model("model-a");
  first->add_tools()->set_name("a-tool-name-longer-than-sso");
  const v1::Snapshot* const address = first.get();
  std::shared_ptr<const v1::Snapshot> copy = first;
  first.reset();
  EXPECT_EQ(pool.idle(), 0u);  // A copy still holds it.
  copy.reset();
  EXPECT_EQ(pool.idle(), 1u);
  std::shared_ptr<v1::Snapshot> again = pool.Acquire();
  EXPECT_EQ(again.get(), address);
  EXPECT_EQ(again->ByteSizeLong(), 0u);
  EXPECT_EQ(pool.idle(), 0u);
}

TEST(SnapshotPoolTest, KeepsNoLargeSnapshotAndAtMostMaxIdle) {
  SnapshotPool pool;
  {
    std::shared_ptr<v1::Snapshot> large = pool.Acquire();
    for (int i = 0; i <= SnapshotPool::kMaxKeptTools; ++i) large->add_tools();
  }
  EXPECT_EQ(pool.idle(), 0u);
  {
    std::vector<std::shared_ptr<v1::Snapshot>> held;
    for (size_t i = 0; i < SnapshotPool::kMaxIdle + 10; ++i) {
      held.push_back(pool.Acquire());
    }
  }
  EXPECT_EQ(pool.idle(), SnapshotPool::kMaxIdle);
}

TEST(SnapshotPoolTest, ASnapshotMayOutliveItsPool) {
  std::shared_ptr<v1::Snapshot> kept;
  {
    SnapshotPool pool;
    kept = pool.Acquire();
    kept->set_model("model-b");
  }
  EXPECT_EQ(kept->model(), "model-b");
  kept.reset();  // Returned to the pool's idle list, which it kept alive.
}

TEST(SnapshotPoolTest, ThreadsAcquireAndReleaseConcurrently) {
  SnapshotPool pool;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&pool, t] {
      std::vector<std::shared_ptr<v1::Snapshot>> held;
      for (int i = 0; i < 2000; ++i) {
        std::shared_ptr<v1::Snapshot> snapshot = pool.Acquire();
        EXPECT_EQ(snapshot->tools_size(), 0);
        snapshot->add_tools()->set_name("tool");
        snapshot->set_request_id(std::to_string(t));
        held.push_back(std::move(snapshot));
        if (held.size() > 8) held.erase(held.begin());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_LE(pool.idle(), 4u * 9);
  EXPECT_GT(pool.idle(), 0u);
}

}  // namespace
}  // namespace cachewatch
