// Closing a SqliteStore after calls made on other threads. Run under
// ThreadSanitizer in CI (scripts/run-sanitizers.sh), where a close that is
// not ordered after those calls is reported as a data race.
#include <atomic>
#include <thread>

#include "daemon/store/sqlite/store_test_util.h"

namespace cachewatch::testing {
namespace {

// The caller learns that its calls returned through a relaxed atomic, which
// orders nothing: as the daemon learns it from grpc::Server::Shutdown(),
// whose wait for the handler threads happens inside uninstrumented gRPC. The
// store's destructor must order the calls before closing the connections
// itself (before it did, TSan reported the close racing with the queries'
// last statement resets, as it did in a TSan-built cachewatchd).
TEST_F(StoreTest, ClosesAfterCallsThatReturnedOnOtherThreads) {
  std::unique_ptr<SqliteStore> store = OpenStore();
  const LaneKey key = Key();
  const v1::PromptCacheBreak event = WriteBrokenPair(*store, key);
  std::atomic<bool> returned{false};
  std::thread caller([&returned, &event, key, raw = store.get()] {
    EXPECT_TRUE(raw->ListBreaks({}).ok());
    EXPECT_TRUE(raw->ExplainBreak(event.break_id()).ok());
    EXPECT_TRUE(raw->LaneTimeline(key, 10).ok());
    EXPECT_TRUE(raw->FindClassification(key, "r1").ok());
    EXPECT_TRUE(raw->LoadRecentLanes(kT0).ok());
    EXPECT_TRUE(raw->Write(TurnUnit(key, "r2", kT0 + 120 * kSecond,
                                    Classified(key, "r2", v1::VERDICT_OK)))
                    .ok());
    EXPECT_TRUE(raw->ProbeWritable().ok());
    returned.store(true, std::memory_order_relaxed);
  });
  while (!returned.load(std::memory_order_relaxed)) std::this_thread::yield();
  store.reset();
  caller.join();
}

}  // namespace
}  // namespace cachewatch::testing
