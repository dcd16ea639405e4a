// Tests of the Reporter against the real cachewatchd: records arrive once
// and durably, Report* never blocks, and delivery survives a daemon that is
// down, comes back, or is killed mid-stream and restarted.
#include "cachewatch/client/reporter.h"

#include <arpa/inet.h>
#include <google/protobuf/util/time_util.h>
#include <gtest/gtest.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cachewatch/client/fleet_reporter.h"
#include "tests/support/daemon_process.h"
#include "tests/support/stored_rows.h"

namespace cachewatch::client {
namespace {

using google::protobuf::util::TimeUtil;
using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;
using testing::DaemonProcess;
using testing::TempDir;

// Turn t is requested t seconds after this (half an hour ago) and answered
// half a second later.
const int64_t kStartUs =
    std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::system_clock::now().time_since_epoch())
        .count() -
    1800LL * 1'000'000;

v1::Snapshot Snapshot(const std::string& session, int turn) {
  v1::Snapshot snapshot;
  snapshot.set_agent("reporter-agent");
  snapshot.set_session_id(session);
  snapshot.set_request_id("r" + std::to_string(turn));
  *snapshot.mutable_request_time() =
      TimeUtil::MicrosecondsToTimestamp(kStartUs + turn * 1'000'000LL);
  snapshot.set_provider(v1::PROVIDER_ANTHROPIC);
  snapshot.set_model("claude-sonnet-4-5");
  snapshot.set_system_hash(0xabc);
  const char* names[] = {"Bash", "Read", "Write"};
  for (int i = 0; i < 3; ++i) {
    v1::ToolRef* tool = snapshot.add_tools();
    tool->set_name(names[i]);
    tool->set_schema_hash(100 + i);
  }
  snapshot.mutable_cache_control()->set_enabled(true);
  return snapshot;
}

v1::Usage Usage(const std::string& session, int turn) {
  v1::Usage usage;
  usage.set_agent("reporter-agent");
  usage.set_session_id(session);
  usage.set_request_id("r" + std::to_string(turn));
  *usage.mutable_response_time() = TimeUtil::MicrosecondsToTimestamp(
      kStartUs + turn * 1'000'000LL + 500'000);
  usage.set_provider(v1::PROVIDER_ANTHROPIC);
  usage.set_raw_usage_json(
      "{\"input_tokens\":40,\"cache_read_input_tokens\":20000,"
      "\"cache_creation_input_tokens\":0,\"output_tokens\":200}");
  return usage;
}

// Reports turns [first, first + count) of `session`, snapshot then usage.
template <typename AnyReporter>
void ReportTurns(AnyReporter& reporter, const std::string& session, int first,
                 int count) {
  for (int turn = first; turn < first + count; ++turn) {
    EXPECT_TRUE(reporter.ReportSnapshot(Snapshot(session, turn)));
    EXPECT_TRUE(reporter.ReportUsage(Usage(session, turn)));
  }
}

// A loopback port nothing listens on (until a daemon is started on it).
std::string FreeAddress() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), length), 0);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  close(fd);
  return "127.0.0.1:" + std::to_string(ntohs(address.sin_port));
}

// Forwards TCP connections from a loopback port of its own to the daemon of
// the moment, so that the reporter keeps one address while daemons stop and
// start (each DaemonProcess listens on a port it picks itself). While no
// daemon listens at the target, connections are accepted and closed at once.
class Forwarder {
 public:
  Forwarder() {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address);
    EXPECT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&address), length),
              0);
    EXPECT_EQ(listen(listen_fd_, 16), 0);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    acceptor_ = std::thread([this] { Accept(); });
  }

  ~Forwarder() {
    shutdown(listen_fd_, SHUT_RDWR);  // Ends accept().
    acceptor_.join();
    close(listen_fd_);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (int fd : open_fds_) shutdown(fd, SHUT_RDWR);
    }
    for (std::thread& pump : pumps_) pump.join();
  }

  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  // Where new connections go: "host:port", as DaemonProcess::grpc_address.
  void set_target(const std::string& target) {
    std::lock_guard<std::mutex> lock(mutex_);
    target_ = target;
  }

 private:
  void Accept() {
    for (int client; (client = accept(listen_fd_, nullptr, nullptr)) >= 0;) {
      std::lock_guard<std::mutex> lock(mutex_);
      const int upstream = Connect(target_);
      if (upstream < 0) {
        close(client);
        continue;
      }
      open_fds_.insert({client, upstream});
      pumps_.emplace_back([this, client, upstream] { Pump(client, upstream); });
    }
  }

  static int Connect(const std::string& target) {
    const size_t colon = target.rfind(':');
    if (colon == std::string::npos) return -1;
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (getaddrinfo(target.substr(0, colon).c_str(),
                    target.substr(colon + 1).c_str(), &hints, &found) != 0) {
      return -1;
    }
    int fd = socket(found->ai_family, SOCK_STREAM, 0);
    if (connect(fd, found->ai_addr, found->ai_addrlen) != 0) {
      close(fd);
      fd = -1;
    }
    freeaddrinfo(found);
    return fd;
  }

  // Copies bytes both ways until either side closes, then closes both.
  void Pump(int client, int upstream) {
    pollfd fds[2] = {{client, POLLIN, 0}, {upstream, POLLIN, 0}};
    char buffer[16384];
    for (bool open = true; open && poll(fds, 2, -1) > 0;) {
      for (int i = 0; i < 2 && open; ++i) {
        if (fds[i].revents == 0) continue;
        ssize_t n = read(fds[i].fd, buffer, sizeof(buffer));
        open = n > 0;
        for (ssize_t done = 0, w = 0; open && done < n; done += w) {
          w = send(fds[1 - i].fd, buffer + done, n - done, MSG_NOSIGNAL);
          open = w > 0;
        }
      }
    }
    std::lock_guard<std::mutex> lock(mutex_);
    open_fds_.erase(client);
    open_fds_.erase(upstream);
    close(client);
    close(upstream);
  }

  int listen_fd_ = -1;
  int port_ = 0;
  std::mutex mutex_;
  std::string target_;              // Guarded by mutex_.
  std::set<int> open_fds_;          // Guarded by mutex_.
  std::vector<std::thread> pumps_;  // Guarded by mutex_.
  std::thread acceptor_;
};

// The number of turns of `session` in the database at `db_path` with both
// their snapshot and their usage, and the number of all its turns.
struct TurnRows {
  int64_t complete = -1;
  int64_t all = -1;
};

TurnRows CountTurns(const std::string& db_path, const std::string& session) {
  TurnRows rows;
  sqlite3* db = nullptr;
  EXPECT_EQ(
      sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr),
      SQLITE_OK);
  sqlite3_stmt* statement = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db,
                               "SELECT COALESCE(SUM(snapshot_received = 1 AND "
                               "usage_received = 1), 0), COUNT(*) FROM turns "
                               "WHERE session_id = ?",
                               -1, &statement, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_bind_text(statement, 1, session.c_str(), -1, SQLITE_TRANSIENT);
  if (sqlite3_step(statement) == SQLITE_ROW) {
    rows.complete = sqlite3_column_int64(statement, 0);
    rows.all = sqlite3_column_int64(statement, 1);
  }
  sqlite3_finalize(statement);
  sqlite3_close(db);
  return rows;
}

// The daemon's side of Record for a store that is full at first: each
// record's first send is acked RESOURCE_EXHAUSTED, every later one OK.
class FullOnceService final : public v1::CacheWatch::Service {
 public:
  grpc::Status Record(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::RecordAck, v1::RecordRequest>* stream)
      override {
    v1::RecordRequest request;
    while (stream->Read(&request)) {
      v1::RecordAck ack;
      ack.set_is_usage(request.has_usage());
      ack.set_request_id(request.has_usage() ? request.usage().request_id()
                                             : request.snapshot().request_id());
      {
        std::lock_guard<std::mutex> lock(mutex_);
        const bool first =
            seen_.insert({ack.is_usage(), ack.request_id()}).second;
        ack.set_code(first ? grpc::StatusCode::RESOURCE_EXHAUSTED
                           : grpc::StatusCode::OK);
      }
      if (!stream->Write(ack)) break;
    }
    return grpc::Status::OK;
  }

 private:
  std::mutex mutex_;
  std::set<std::pair<bool, std::string>> seen_;  // Guarded by mutex_.
};

TEST(ReporterTest, RecordsArriveAndAreAcknowledged) {
  TempDir dir;
  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start(dir.File("cachewatch.db")));
  Reporter reporter({.address = daemon.grpc_address()});
  ReportTurns(reporter, "arrive", 0, 50);

  ASSERT_TRUE(reporter.Flush(seconds(10)));
  const ReporterStats stats = reporter.stats();
  EXPECT_EQ(stats.enqueued, 100u);
  EXPECT_EQ(stats.acked, 100u);
  EXPECT_GE(stats.sent, 100u);
  EXPECT_EQ(stats.rejected, 0u);
  EXPECT_EQ(stats.dropped, 0u);
  EXPECT_TRUE(stats.connected);
  const TurnRows rows = CountTurns(dir.File("cachewatch.db"), "arrive");
  EXPECT_EQ(rows.complete, 50);
  EXPECT_EQ(rows.all, 50);
}

TEST(ReporterTest, NeverBlocksAndCountsDropsWhileTheDaemonIsDown) {
  Reporter reporter(
      {.address = FreeAddress(), .flush_timeout = milliseconds(0)});
  constexpr int kCalls = 20000;
  int accepted = 0;
  steady_clock::duration slowest{};
  for (int i = 0; i < kCalls; ++i) {
    // The record is built, and copied into the argument, outside the timing.
    v1::Snapshot snapshot = Snapshot("down", i);
    v1::Usage usage = Usage("down", i);
    const steady_clock::time_point start = steady_clock::now();
    const bool ok = i % 2 == 0 ? reporter.ReportSnapshot(std::move(snapshot))
                               : reporter.ReportUsage(std::move(usage));
    slowest = std::max(slowest, steady_clock::now() - start);
    accepted += ok;
  }

  // Generous, above a thread descheduled on a loaded machine under TSan
  // (272 ms seen at nice 19); a call that waited on the connection would
  // wait out the reporter's backoff, which grows to seconds (max 10 s)
  // over the test's 20,000 calls.
  EXPECT_LT(slowest, milliseconds(2000));
  const ReporterStats stats = reporter.stats();
  EXPECT_EQ(stats.enqueued, static_cast<uint64_t>(accepted));
  EXPECT_EQ(stats.enqueued + stats.dropped, static_cast<uint64_t>(kCalls));
  // Nothing leaves the queue (of 10,000) while no daemon is reachable.
  EXPECT_EQ(stats.dropped, static_cast<uint64_t>(kCalls - 10000));
  EXPECT_EQ(stats.acked, 0u);
  EXPECT_FALSE(stats.connected);
  EXPECT_FALSE(reporter.Flush(milliseconds(10)));
}

TEST(ReporterTest, DeliversOnceTheDaemonComesBack) {
  TempDir dir;
  Forwarder forwarder;  // No daemon yet.
  Reporter reporter({.address = forwarder.address()});
  ReportTurns(reporter, "late", 0, 20);
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(reporter.stats().acked, 0u);

  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start(dir.File("cachewatch.db")));
  forwarder.set_target(daemon.grpc_address());
  ASSERT_TRUE(reporter.Flush(seconds(10)));
  const ReporterStats stats = reporter.stats();
  EXPECT_EQ(stats.acked, 40u);
  EXPECT_EQ(stats.dropped, 0u);
  EXPECT_TRUE(stats.connected);
  EXPECT_EQ(CountTurns(dir.File("cachewatch.db"), "late").complete, 20);
}

// Waits (up to 10 s) until `reporter` has at least `count` records sent but
// not acknowledged; fails the test if it never has.
void AwaitRecordsInFlight(Reporter& reporter, uint64_t count) {
  const steady_clock::time_point deadline = steady_clock::now() + seconds(10);
  for (;;) {
    const ReporterStats stats = reporter.stats();
    if (stats.sent >= stats.acked + count) return;
    ASSERT_LT(steady_clock::now(), deadline)
        << "never " << count << " records in flight";
  }
}

// Daemon processes in turn on one database, behind one forwarder, and a
// reporter sending to them: the first daemon ends (each test says how)
// while records are sent but not yet acknowledged.
class ReporterRestartTest : public ::testing::Test {
 protected:
  static constexpr int kTurns = 1000;

  // Starts the first daemon and the reporter, reports turns [0, kTurns) of
  // `session` and waits until 20 records are in flight.
  void StartAndReport(const std::string& session) {
    ASSERT_NO_FATAL_FAILURE(StartDaemon());
    reporter_.emplace(ReporterOptions{.address = forwarder_.address()});
    ReportTurns(*reporter_, session, 0, kTurns);
    ASSERT_NO_FATAL_FAILURE(AwaitRecordsInFlight(*reporter_, 20));
  }

  // A new daemon process on the database (a DaemonProcess starts once),
  // with the forwarder pointed at it.
  void StartDaemon() {
    daemon_ = std::make_unique<DaemonProcess>();
    ASSERT_TRUE(daemon_->Start(db_path_));
    forwarder_.set_target(daemon_->grpc_address());
  }

  TempDir dir_;
  const std::string db_path_ = dir_.File("cachewatch.db");
  Forwarder forwarder_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::optional<Reporter> reporter_;
};

TEST_F(ReporterRestartTest, ResendsWhatAKilledDaemonDidNotAcknowledge) {
  ASSERT_NO_FATAL_FAILURE(StartAndReport("killed"));
  daemon_->Kill();
  ReportTurns(*reporter_, "killed", kTurns, 100);
  std::this_thread::sleep_for(milliseconds(200));

  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  ASSERT_TRUE(reporter_->Flush(seconds(20)));
  const ReporterStats stats = reporter_->stats();
  EXPECT_EQ(stats.enqueued, 2u * (kTurns + 100));
  EXPECT_EQ(stats.acked, stats.enqueued);
  EXPECT_EQ(stats.rejected, 0u);
  EXPECT_GT(stats.retried, 0u);
  EXPECT_GT(stats.reconnects, 0u);
  const TurnRows rows = CountTurns(db_path_, "killed");
  EXPECT_EQ(rows.complete, kTurns + 100);
  EXPECT_EQ(rows.all, kTurns + 100);
}

// Records a daemon received since it started: the sum of every
// cachewatch_ingest_records_total series on its /metrics.
double IngestedRecords(const DaemonProcess& daemon) {
  std::istringstream lines(
      testing::HttpGet(daemon.metrics_address(), "/metrics"));
  double total = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("cachewatch_ingest_records_total{")) {
      total += std::stod(line.substr(line.rfind(' ') + 1));
    }
  }
  return total;
}

// A SIGTERMed daemon acknowledges everything it stored before it ends the
// stream, so the reporter resends exactly the records it has no ack for:
// the restarted daemon receives each of those once and nothing else.
TEST_F(ReporterRestartTest, ResendsOnlyWhatASigtermedDaemonDidNotAcknowledge) {
  ASSERT_NO_FATAL_FAILURE(StartAndReport("stopped"));
  ASSERT_EQ(daemon_->Stop(), 0);
  const uint64_t acked_before_restart = reporter_->stats().acked;
  ASSERT_LT(acked_before_restart, 2u * kTurns);

  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  ASSERT_TRUE(reporter_->Flush(seconds(20)));
  const ReporterStats stats = reporter_->stats();
  EXPECT_EQ(stats.enqueued, 2u * kTurns);
  EXPECT_EQ(stats.acked, stats.enqueued);
  EXPECT_EQ(stats.rejected, 0u);
  EXPECT_EQ(IngestedRecords(*daemon_),
            static_cast<double>(stats.enqueued - acked_before_restart));
  const TurnRows rows = CountTurns(db_path_, "stopped");
  EXPECT_EQ(rows.complete, kTurns);
  EXPECT_EQ(rows.all, kTurns);
}

TEST(ReporterTest, RejectsAnInvalidRecordWithoutRetryingOrStopping) {
  TempDir dir;
  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start(dir.File("cachewatch.db")));
  Reporter reporter({.address = daemon.grpc_address()});
  ReportTurns(reporter, "valid", 0, 5);
  EXPECT_TRUE(reporter.ReportSnapshot(Snapshot("", 100)));  // No session.
  ReportTurns(reporter, "valid", 5, 5);

  ASSERT_TRUE(reporter.Flush(seconds(10)));
  const ReporterStats stats = reporter.stats();
  EXPECT_EQ(stats.enqueued, 21u);
  EXPECT_EQ(stats.rejected, 1u);
  EXPECT_EQ(stats.acked, 20u);
  EXPECT_EQ(stats.retried, 0u);
  EXPECT_EQ(stats.sent, 21u);
  EXPECT_EQ(CountTurns(dir.File("cachewatch.db"), "valid").complete, 10);
}

TEST(ReporterTest, SendsAgainWhatAFullStoreCouldNotTake) {
  FullOnceService service;
  int port = 0;
  std::unique_ptr<grpc::Server> server =
      grpc::ServerBuilder()
          .AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                            &port)
          .RegisterService(&service)
          .BuildAndStart();
  ASSERT_NE(server, nullptr);
  Reporter reporter({.address = "127.0.0.1:" + std::to_string(port)});
  ReportTurns(reporter, "full", 0, 10);

  ASSERT_TRUE(reporter.Flush(seconds(10)));
  const ReporterStats stats = reporter.stats();
  EXPECT_EQ(stats.acked, 20u);
  EXPECT_EQ(stats.retried, 20u);
  EXPECT_EQ(stats.sent, 40u);
  EXPECT_EQ(stats.rejected, 0u);
}

TEST(FleetReporterTest, RendezvousOrderIsStableSpreadAndMovesOnlyTheLost) {
  const std::vector<std::string> all = {"a:1", "b:2", "c:3"};
  std::map<std::string, int> firsts;
  for (int i = 0; i < 300; ++i) {
    const std::string lane = LaneKeyOf("agent", "s" + std::to_string(i), "");
    const std::vector<std::string> order = RendezvousOrder(lane, all);
    EXPECT_EQ(order, RendezvousOrder(lane, {"c:3", "b:2", "a:1"}));
    ++firsts[order.front()];
    if (order.front() != "b:2") {
      EXPECT_EQ(RendezvousOrder(lane, {"a:1", "c:3"}).front(), order.front());
    }
  }
  for (const std::string& address : all) EXPECT_GT(firsts[address], 50);
  EXPECT_EQ(LaneKeyOf("x", "s", ""), LaneKeyOf("x", "s", "main"));
}

// The stored request ids of `session` in the daemon's database.
std::vector<std::string> StoredIds(const std::string& db,
                                   const std::string& session) {
  return testing::StoredRows(db,
                             "SELECT request_id FROM turns WHERE "
                             "session_id = '" +
                                 session + "' ORDER BY request_id");
}

template <typename Check>
bool Eventually(Check check) {
  for (int i = 0; i < 300; ++i) {
    if (check()) return true;
    std::this_thread::sleep_for(milliseconds(50));
  }
  return check();
}

// Two daemons on addresses picked in advance, each on its own database, and
// a FleetReporter over both with short backoffs.
class FleetFailoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartDaemon(0));
    ASSERT_NO_FATAL_FAILURE(StartDaemon(1));
    fleet_.emplace(
        FleetReporterOptions{.addresses = addresses_,
                             .reporter = {.initial_backoff = milliseconds(20),
                                          .max_backoff = milliseconds(200),
                                          .flush_timeout = milliseconds(0)}});
  }

  // (Re)starts daemon `i` on its address and database.
  void StartDaemon(int i) {
    daemons_[i] = std::make_unique<DaemonProcess>();
    ASSERT_TRUE(daemons_[i]->Start(dbs_[i], {"--listen=" + addresses_[i]}));
  }

  TempDir dir_;
  const std::vector<std::string> addresses_ = {FreeAddress(), FreeAddress()};
  const std::vector<std::string> dbs_ = {dir_.File("a.db"), dir_.File("b.db")};
  std::unique_ptr<DaemonProcess> daemons_[2];
  std::optional<FleetReporter> fleet_;
};

TEST_F(FleetFailoverTest, LanesStayFailOverAndComeBack) {
  const std::vector<std::string>& addresses = addresses_;
  const std::vector<std::string>& dbs = dbs_;
  FleetReporter& fleet = *fleet_;
  // Ten lanes of two turns: each lane's turns on its first daemon only.
  for (int lane = 0; lane < 10; ++lane) {
    ReportTurns(fleet, "lane" + std::to_string(lane), 0, 2);
  }
  ASSERT_TRUE(fleet.Flush(seconds(10)));
  std::string moved;
  for (int lane = 0; lane < 10; ++lane) {
    const std::string session = "lane" + std::to_string(lane);
    const std::string home =
        RendezvousOrder(LaneKeyOf("reporter-agent", session, ""), addresses)
            .front();
    const int at = home == addresses[0] ? 0 : 1;
    EXPECT_EQ(StoredIds(dbs[at], session),
              (std::vector<std::string>{"r0", "r1"}));
    EXPECT_TRUE(StoredIds(dbs[1 - at], session).empty());
    if (at == 0 && moved.empty()) moved = session;
  }
  ASSERT_FALSE(moved.empty()) << "no lane lives on daemon 0";

  // Daemon 0 hangs, then dies, with the lane's turn 2 on its way to it: a
  // hung daemon's connection stays open, so the turn is queued for it
  // whatever the timing, and stays queued for it once it is gone. (Hung once
  // all its threads are stopped: until then one could still ack the turn,
  // and a daemon killed outright could be found gone before the turn is
  // reported, which moves the lane first: the next test.)
  ASSERT_TRUE(daemons_[0]->Suspend());
  ReportTurns(fleet, moved, 2, 1);
  daemons_[0]->Kill();
  ASSERT_TRUE(Eventually([&] {
    return fleet.AddressFor("reporter-agent", moved, "") == addresses[1];
  }));
  ReportTurns(fleet, moved, 3, 1);
  ASSERT_TRUE(Eventually([&] {
    const std::vector<std::string> ids = StoredIds(dbs[1], moved);
    return std::find(ids.begin(), ids.end(), "r3") != ids.end();
  }));

  // Daemon 0 returns on its address: its queued turn arrives, the lane
  // comes home.
  ASSERT_NO_FATAL_FAILURE(StartDaemon(0));
  ASSERT_TRUE(Eventually([&] {
    return fleet.AddressFor("reporter-agent", moved, "") == addresses[0];
  }));
  ReportTurns(fleet, moved, 4, 1);
  ASSERT_TRUE(fleet.Flush(seconds(10)));
  EXPECT_EQ(StoredIds(dbs[0], moved),
            (std::vector<std::string>{"r0", "r1", "r2", "r4"}));
  EXPECT_EQ(StoredIds(dbs[1], moved), (std::vector<std::string>{"r3"}));
}

// A daemon that dies while its reporter has nothing outstanding ends the
// reporter's open stream: the lane moves before its next record, which
// reaches the other daemon instead of waiting for the dead one, and comes
// home when the daemon is back.
TEST_F(FleetFailoverTest, ALaneLeavesADaemonThatDiedWhileItsReporterWasIdle) {
  const std::vector<std::string>& addresses = addresses_;
  const std::vector<std::string>& dbs = dbs_;
  FleetReporter& fleet = *fleet_;
  std::string lane;
  for (int i = 0; lane.empty(); ++i) {
    const std::string session = "idle" + std::to_string(i);
    if (RendezvousOrder(LaneKeyOf("reporter-agent", session, ""), addresses)
            .front() == addresses[0]) {
      lane = session;
    }
  }
  ReportTurns(fleet, lane, 0, 2);
  ASSERT_TRUE(fleet.Flush(seconds(10)));
  ASSERT_EQ(StoredIds(dbs[0], lane), (std::vector<std::string>{"r0", "r1"}));

  daemons_[0]->Kill();
  ASSERT_TRUE(Eventually([&] {
    return fleet.AddressFor("reporter-agent", lane, "") == addresses[1];
  }));
  ReportTurns(fleet, lane, 2, 1);
  ASSERT_TRUE(fleet.Flush(seconds(10)));
  EXPECT_EQ(StoredIds(dbs[1], lane), (std::vector<std::string>{"r2"}));
  EXPECT_EQ(fleet.stats().at(addresses[0]).enqueued, 4u);

  ASSERT_NO_FATAL_FAILURE(StartDaemon(0));
  ASSERT_TRUE(Eventually([&] {
    return fleet.AddressFor("reporter-agent", lane, "") == addresses[0];
  }));
  ReportTurns(fleet, lane, 3, 1);
  ASSERT_TRUE(fleet.Flush(seconds(10)));
  EXPECT_EQ(StoredIds(dbs[0], lane),
            (std::vector<std::string>{"r0", "r1", "r3"}));
  // Both of turn 3's records: the daemon is healthy again, not only idle.
  EXPECT_EQ(StoredIds(dbs[1], lane), (std::vector<std::string>{"r2"}));
  EXPECT_EQ(fleet.stats().at(addresses[0]).acked, 6u);
}

}  // namespace
}  // namespace cachewatch::client
