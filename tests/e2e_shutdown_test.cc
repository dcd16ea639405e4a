// Graceful shutdown end to end: on SIGTERM the daemon says NOT_SERVING,
// refuses new work, acknowledges everything it committed on the open Record
// streams, ends them with UNAVAILABLE saying it is stopping, and exits well
// within the grace period.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <set>
#include <string>
#include <thread>

#include "cachewatch/v1/service.grpc.pb.h"
#include "health.grpc.pb.h"
#include "tests/support/daemon_process.h"
#include "tests/support/stream_load.h"
#include "tests/support/turn_records.h"

namespace cachewatch {
namespace {

using grpc::health::v1::HealthCheckResponse;
using std::chrono::milliseconds;
using std::chrono::steady_clock;
using testing::DaemonProcess;
using testing::StoredRecordKeys;
using testing::StreamLoad;
using testing::TempDir;

constexpr int kGraceSeconds = 30;

TEST(ShutdownTest, SigtermAcknowledgesCommittedRecordsThenEndsStreams) {
  TempDir dir;
  const std::string db = dir.File("cachewatch.db");
  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start(
      db, {"--shutdown-grace-seconds=" + std::to_string(kGraceSeconds)}));

  // A health checker, as a load balancer would have, polling from before
  // the SIGTERM until it sees NOT_SERVING or the server is gone.
  auto health = grpc::health::v1::Health::NewStub(grpc::CreateChannel(
      daemon.grpc_address(), grpc::InsecureChannelCredentials()));
  auto Check = [&] {
    grpc::ClientContext context;
    grpc::health::v1::HealthCheckRequest request;
    request.set_service("cachewatch.v1.CacheWatch");
    HealthCheckResponse response;
    const grpc::Status status = health->Check(&context, request, &response);
    return status.ok() ? response.status() : HealthCheckResponse::UNKNOWN;
  };
  ASSERT_EQ(Check(), HealthCheckResponse::SERVING);
  std::atomic<bool> checking{true};
  std::atomic<bool> saw_not_serving{false};
  std::thread checker([&] {
    while (checking) {
      const auto status = Check();
      if (status == HealthCheckResponse::NOT_SERVING) saw_not_serving = true;
      if (status != HealthCheckResponse::SERVING) return;
    }
  });

  StreamLoad load(daemon.grpc_address(), "shutdown", "stream", 4);
  const auto started = steady_clock::now();
  while (load.acked_count() < 2000 &&
         steady_clock::now() - started < std::chrono::seconds(20)) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  ASSERT_GE(load.acked_count(), 2000u) << "the load never got going";

  const auto sigterm = steady_clock::now();
  kill(daemon.pid(), SIGTERM);
  // Work that arrives once the shutdown has begun (health says NOT_SERVING
  // first; the refusal of new work follows at once) is refused, never
  // accepted. The signal is handled asynchronously, so wait for that first.
  while (!saw_not_serving &&
         steady_clock::now() - sigterm < std::chrono::seconds(3)) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  std::this_thread::sleep_for(milliseconds(100));
  auto late = daemon.NewStub();
  grpc::ClientContext late_context;
  late_context.set_deadline(std::chrono::system_clock::now() +
                            std::chrono::seconds(10));
  v1::RecordSnapshotRequest late_request;
  *late_request.mutable_snapshot() =
      testing::TurnSnapshot("shutdown", "late", 0);
  v1::RecordSnapshotResponse late_response;
  const grpc::Status late_status =
      late->RecordSnapshot(&late_context, late_request, &late_response);
  EXPECT_EQ(late_status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << late_status.error_message();

  load.Join();  // The daemon ends the streams.
  EXPECT_EQ(daemon.Stop(), 0);
  const auto exit_seconds =
      std::chrono::duration<double>(steady_clock::now() - sigterm).count();
  checking = false;
  checker.join();

  std::printf("SIGTERM to exit: %.2f s\n", exit_seconds);
  EXPECT_LT(exit_seconds, kGraceSeconds / 4.0)
      << "exited after " << exit_seconds << " s\n"
      << daemon.Logs();
  EXPECT_TRUE(saw_not_serving);
  for (const grpc::Status& status : load.statuses()) {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_NE(status.error_message().find("stopping"), std::string::npos)
        << status.error_message();
  }

  const std::set<std::string> acked = load.acked();
  const std::set<std::string> sent = load.sent();
  const std::set<std::string> stored = StoredRecordKeys(db);
  int acked_not_stored = 0, stored_not_acked = 0, stored_not_sent = 0;
  for (const std::string& key : acked)
    acked_not_stored += !stored.contains(key);
  for (const std::string& key : stored) {
    stored_not_acked += !acked.contains(key);
    stored_not_sent += !sent.contains(key);
  }
  EXPECT_EQ(acked_not_stored, 0) << "of " << acked.size() << " acked";
  // Everything committed was acknowledged before the streams ended: a client
  // that resends what it has no ack for never resends a stored record.
  EXPECT_EQ(stored_not_acked, 0) << "of " << stored.size() << " stored";
  EXPECT_EQ(stored_not_sent, 0);
  EXPECT_GT(sent.size(), acked.size() / 2);
  EXPECT_EQ(late_status.error_code(), grpc::StatusCode::UNAVAILABLE);
}

// A health Watch on the daemon, as a client-side health checker keeps open:
// on SIGTERM it sees NOT_SERVING at once, then the call ends, so it does not
// hold the server's shutdown up.
TEST(ShutdownTest, HealthWatchSeesNotServingThenEndsOnSigterm) {
  TempDir dir;
  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start(
      dir.File("cachewatch.db"),
      {"--shutdown-grace-seconds=" + std::to_string(kGraceSeconds)}));
  auto health = grpc::health::v1::Health::NewStub(grpc::CreateChannel(
      daemon.grpc_address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckRequest request;
  request.set_service("cachewatch.v1.CacheWatch");
  auto watch = health->Watch(&context, request);
  // Between the server's start and the store's first probe the service is
  // not known yet.
  HealthCheckResponse response;
  do {
    ASSERT_TRUE(watch->Read(&response));
  } while (response.status() == HealthCheckResponse::SERVICE_UNKNOWN);
  ASSERT_EQ(response.status(), HealthCheckResponse::SERVING);

  kill(daemon.pid(), SIGTERM);
  ASSERT_TRUE(watch->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  EXPECT_FALSE(watch->Read(&response));
  const grpc::Status ended = watch->Finish();
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::UNAVAILABLE)
      << ended.error_message();
  EXPECT_NE(ended.error_message().find("stopping"), std::string::npos)
      << ended.error_message();
  EXPECT_EQ(daemon.Stop(), 0);
}

}  // namespace
}  // namespace cachewatch
