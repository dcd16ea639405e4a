// The PostgreSQL store's own behaviour, on a real PostgreSQL 15 server
// started by the test: day partitions created ahead and dropped by
// retention, migrations, two stores (two daemons) writing the same turns,
// a commit past the statement timeout, and a server restart mid-run with
// nothing acknowledged lost.
#include "daemon/store/postgres/postgres_store.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/store/postgres/pg_binary_rows.h"
#include "daemon/store/postgres/pg_connection.h"
#include "daemon/store/postgres/pg_pool.h"
#include "daemon/store/postgres/pg_schema.h"
#include "daemon/store/postgres/pg_write_statements.h"
#include "daemon/store/sqlite/store_test_util.h"
#include "daemon/store/stale_lanes.h"
#include "tests/support/postgres_process.h"

namespace cachewatch::testing {

PostgresProcess* SharedPostgres();  // store_conformance_test.cc

namespace {

class PostgresStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!PostgresProcess::Available()) {
      GTEST_SKIP() << PostgresProcess::SkipReason();
    }
    server_ = SharedPostgres();
    ASSERT_NE(server_, nullptr) << "PostgreSQL failed to start";
    static int databases = 0;
    database_ = absl::StrCat("pgstore_", ++databases);
    ASSERT_TRUE(server_->CreateDatabase(database_));
  }

  PostgresStoreOptions Options() const {
    PostgresStoreOptions options;
    options.url = server_->Url(database_);
    options.timeout = std::chrono::milliseconds(3000);
    options.probe_interval = std::chrono::milliseconds(100);
    return options;
  }

  std::unique_ptr<PostgresStore> Open() {
    absl::StatusOr<std::unique_ptr<PostgresStore>> store =
        PostgresStore::Open(Options());
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  int64_t Query(const std::string& sql) {
    const std::string out = server_->Psql(database_, sql);
    int64_t value = -1;
    if (!absl::SimpleAtoi(out, &value)) ADD_FAILURE() << sql << ": " << out;
    return value;
  }

  // The partitions of `table`, by name.
  std::set<std::string> Partitions(const std::string& table) {
    const std::string out = server_->Psql(
        database_,
        "SELECT string_agg(c.relname, ',' ORDER BY c.relname) FROM "
        "pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE "
        "i.inhparent = '" +
            table + "'::regclass");
    std::set<std::string> names;
    const std::vector<std::string> parts =
        absl::StrSplit(out, ',', absl::SkipEmpty());
    for (const std::string& name : parts) {
      names.insert(name);
    }
    return names;
  }

  PostgresProcess* server_ = nullptr;
  std::string database_;
};

std::string DayName(const std::string& table, int64_t day) {
  return absl::StrCat(
      table, "_p",
      absl::FormatTime("%Y%m%d", absl::FromUnixSeconds(day * 86400),
                       absl::UTCTimeZone()));
}

// PgConnection::CopyIn, which inserts a batch's new turns: input larger
// than one piece handed to libpq (1 MiB) arrives whole; a COPY the server
// refuses (a missing table, input not in the format) is an error naming its
// SQLSTATE, and the connection goes on.
TEST_F(PostgresStoreTest, CopyInSendsAllItsRowsAndReportsRefusals) {
  absl::StatusOr<std::unique_ptr<PgConnection>> connection =
      PgConnection::Connect(server_->Url(database_),
                            std::chrono::milliseconds(10000));
  ASSERT_TRUE(connection.ok()) << connection.status();
  PgConnection& pg = **connection;
  ASSERT_TRUE(pg.Exec("CREATE TABLE copied (name text, n bigint)").ok());
  constexpr int kRows = 100000;  // ~4.6 MB of COPY data.
  PgBinaryRows rows("t8", PgBinaryRows::Layout::kCopy);
  for (int i = 0; i < kRows; ++i) {
    rows.Row().Text(absl::StrCat("row-", i, "-abcdefghijklmnop")).Int(i);
  }
  const std::string data = rows.CopyData();
  ASSERT_GT(data.size(), size_t{3} << 20);
  absl::StatusOr<int64_t> copied =
      pg.CopyIn("COPY copied (name, n) FROM STDIN (FORMAT binary)", data);
  ASSERT_TRUE(copied.ok()) << copied.status();
  EXPECT_EQ(*copied, kRows);
  EXPECT_EQ(Query("SELECT count(*) FROM copied WHERE name = 'row-' || n || "
                  "'-abcdefghijklmnop'"),
            kRows);
  EXPECT_EQ(Query("SELECT sum(n) FROM copied"),
            int64_t{kRows} * (kRows - 1) / 2);

  copied = pg.CopyIn("COPY missing (name) FROM STDIN (FORMAT binary)", data);
  EXPECT_EQ(SqlState(copied.status()), "42P01") << copied.status();
  copied = pg.CopyIn("COPY copied (name, n) FROM STDIN (FORMAT binary)",
                     "not the binary format");
  EXPECT_EQ(SqlState(copied.status()), "22P04") << copied.status();
  EXPECT_TRUE(pg.ok());
  absl::StatusOr<PgResult> after = pg.Query("SELECT count(*) FROM copied");
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->row(0).Int(0), kRows);
}

TEST_F(PostgresStoreTest, MigratesOnceAndRefusesANewerSchema) {
  { auto store = Open(); }
  { auto store = Open(); }  // Reopening applies nothing twice.
  EXPECT_EQ(Query("SELECT count(*) FROM cachewatch_schema_migrations"),
            PgLatestSchemaVersion());
  server_->Psql(database_,
                "INSERT INTO cachewatch_schema_migrations (version) VALUES "
                "(999)");
  absl::StatusOr<std::unique_ptr<PostgresStore>> store =
      PostgresStore::Open(Options());
  EXPECT_TRUE(absl::IsFailedPrecondition(store.status())) << store.status();
}

TEST_F(PostgresStoreTest, UnreachableServerIsUnavailable) {
  PostgresStoreOptions options = Options();
  options.url = "postgresql://postgres@127.0.0.1:1/none";
  absl::StatusOr<std::unique_ptr<PostgresStore>> store =
      PostgresStore::Open(options);
  EXPECT_TRUE(absl::IsUnavailable(store.status())) << store.status();
}

TEST_F(PostgresStoreTest, PartitionsAreCreatedAheadAndOnDemand) {
  auto store = Open();
  const int64_t today = PgDayOf(absl::ToUnixMicros(absl::Now()));
  const std::set<std::string> turns = Partitions("turns");
  for (int64_t day = today - 1; day <= today + 2; ++day) {
    EXPECT_TRUE(turns.contains(DayName("turns", day))) << day;
    EXPECT_TRUE(Partitions("prompt_cache_breaks")
                    .contains(DayName("prompt_cache_breaks", day)));
  }
  // A turn of a day long past gets its partition when written.
  const LaneKey key = Key();
  ASSERT_TRUE(store
                  ->Write(TurnUnit(key, "r0", kT0,
                                   BreakWrite(FullBreak(key, "p", "r0", kT0))))
                  .ok());
  EXPECT_TRUE(Partitions("turns").contains(DayName("turns", PgDayOf(kT0))));
  EXPECT_EQ(Query(absl::StrCat("SELECT count(*) FROM ",
                               DayName("prompt_cache_breaks", PgDayOf(kT0)))),
            1);
}

TEST_F(PostgresStoreTest, RetentionDropsWholeDaysAndTrimsTheCutoffDay) {
  auto store = Open();
  const LaneKey key = Key();
  const int64_t day0 = PgDayOf(kT0);
  // 3 turns on each of days 0..3 (at 01:00, 12:00, 23:00), a break on each.
  for (int day = 0; day < 4; ++day) {
    for (int hour : {1, 12, 23}) {
      const int64_t time = (day0 + day) * kPgDayUs + hour * 3600 * kSecond;
      const std::string id = absl::StrCat("d", day, "h", hour);
      ASSERT_TRUE(store
                      ->Write(TurnUnit(
                          key, id, time,
                          hour == 12 ? BreakWrite(FullBreak(key, "p", id, time))
                                     : Classified(key, id, v1::VERDICT_OK)))
                      .ok());
    }
  }
  // Cutoff: day 2 at noon. Days 0 and 1 go whole; day 2 keeps 12:00, 23:00.
  const int64_t cutoff = (day0 + 2) * kPgDayUs + 12 * 3600 * kSecond;
  absl::StatusOr<int64_t> deleted = store->DeleteOlderThan(cutoff);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 6 + 2 + 1);  // Turns of days 0-1, their breaks, d2h1.
  EXPECT_FALSE(Partitions("turns").contains(DayName("turns", day0)));
  EXPECT_FALSE(Partitions("turns").contains(DayName("turns", day0 + 1)));
  EXPECT_FALSE(Partitions("prompt_cache_breaks")
                   .contains(DayName("prompt_cache_breaks", day0 + 1)));
  EXPECT_TRUE(Partitions("turns").contains(DayName("turns", day0 + 2)));
  EXPECT_EQ(Query("SELECT count(*) FROM turns"), 5);
  EXPECT_EQ(Query("SELECT min(request_time_us) FROM turns"), cutoff);
  EXPECT_EQ(Query("SELECT count(*) FROM prompt_cache_breaks"), 2);
  EXPECT_EQ(Query("SELECT count(*) FROM tool_lists"), 1);  // Still used.
  // A late turn of a dropped day is written again (its partition comes
  // back), as the SQLite store would store it.
  ASSERT_TRUE(store
                  ->Write(TurnUnit(key, "late", kT0,
                                   Classified(key, "late", v1::VERDICT_OK)))
                  .ok());
  EXPECT_EQ(Query("SELECT count(*) FROM turns"), 6);
}

// Retention also removes the claims (lane_writers) of lanes it left without
// a turn; a lane that still has turns keeps its claim.
TEST_F(PostgresStoreTest, RetentionRemovesTheClaimsOfLanesWithoutTurns) {
  auto store = Open();
  const LaneKey old_lane = Key("old");
  const LaneKey live_lane = Key("live");
  const int64_t day0 = PgDayOf(kT0);
  ASSERT_TRUE(store
                  ->Write(TurnUnit(old_lane, "o1", kT0,
                                   Classified(old_lane, "o1", v1::VERDICT_OK)))
                  .ok());
  ASSERT_TRUE(store
                  ->Write(TurnUnit(live_lane, "l1", kT0,
                                   Classified(live_lane, "l1", v1::VERDICT_OK)))
                  .ok());
  const int64_t later = (day0 + 3) * kPgDayUs;
  ASSERT_TRUE(store
                  ->Write(TurnUnit(live_lane, "l2", later,
                                   Classified(live_lane, "l2", v1::VERDICT_OK)))
                  .ok());
  EXPECT_EQ(Query("SELECT count(*) FROM lane_writers"), 2);
  absl::StatusOr<int64_t> deleted = store->DeleteOlderThan(later);
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 2);  // o1 and l1; claims are not counted.
  EXPECT_EQ(Query("SELECT count(*) FROM lane_writers"), 1);
  EXPECT_EQ(Query(absl::StrCat(
                "SELECT count(*) FROM lane_writers WHERE session_id = '",
                live_lane.session_id, "'")),
            1);
  // The lane comes back with a new claim when written again.
  ASSERT_TRUE(store
                  ->Write(TurnUnit(old_lane, "o2", later,
                                   Classified(old_lane, "o2", v1::VERDICT_OK)))
                  .ok());
  EXPECT_EQ(Query("SELECT count(*) FROM lane_writers"), 2);
}

// A store inserts a tool list once, then trusts that the server has it; when
// another daemon's retention deleted it meanwhile (the store's turns that
// referenced it gone), the next turn with that list still gets stored, the
// list with it.
TEST_F(PostgresStoreTest, AToolListDeletedByAnotherDaemonIsInsertedAgain) {
  auto store = Open();
  const LaneKey key = Key();
  ASSERT_TRUE(store
                  ->Write(TurnUnit(key, "r0", kT0,
                                   Classified(key, "r0", v1::VERDICT_OK)))
                  .ok());
  ASSERT_EQ(Query("SELECT count(*) FROM tool_lists"), 1);
  // What retention elsewhere does: the turns go, then the unreferenced list
  // (its entries by cascade).
  server_->Psql(database_, "DELETE FROM turns; DELETE FROM tool_lists");
  ASSERT_EQ(Query("SELECT count(*) FROM tool_list_entries"), 0);

  const absl::Status written = store->Write(TurnUnit(
      key, "r1", kT0 + kSecond, Classified(key, "r1", v1::VERDICT_OK)));
  ASSERT_TRUE(written.ok()) << written;
  EXPECT_EQ(Query("SELECT count(*) FROM turns WHERE request_id = 'r1' AND "
                  "tool_list_hash IS NOT NULL"),
            1);
  EXPECT_EQ(Query("SELECT count(*) FROM tool_lists"), 1);
  EXPECT_EQ(Query("SELECT count(*) FROM tool_list_entries"), 3);
  // And the list is trusted again from then on.
  ASSERT_TRUE(store
                  ->Write(TurnUnit(key, "r2", kT0 + 2 * kSecond,
                                   Classified(key, "r2", v1::VERDICT_OK)))
                  .ok());
  EXPECT_EQ(Query("SELECT count(*) FROM turns"), 2);
}

// A turn whose snapshot (or usage) is in the batch is looked up only in the
// partitions within a day of it, with its classification too: not in every
// partition of the retention window. Counted by the writer's index scans
// (pg_stat_user_indexes, once the writer has flushed its statistics).
TEST_F(PostgresStoreTest, ATurnWithItsSnapshotInTheBatchIsLookedUpNearItsTime) {
  auto store = Open();
  const LaneKey key = Key();
  ASSERT_TRUE(store
                  ->Write(TurnUnit(key, "r0", kT0,
                                   Classified(key, "r0", v1::VERDICT_OK)))
                  .ok());
  const std::string near = DayName("turns", PgDayOf(kT0));
  std::map<std::string, int64_t> scans;  // By partition.
  while (scans[near] == 0) {
    scans.clear();
    const std::vector<std::string> rows = absl::StrSplit(
        server_->Psql(database_,
                      "SELECT string_agg(t.relname || '=' || s.idx_scan, ',') "
                      "FROM pg_inherits AS i JOIN pg_index AS x ON "
                      "x.indexrelid = i.inhrelid JOIN pg_class AS t ON t.oid = "
                      "x.indrelid JOIN pg_stat_user_indexes AS s ON "
                      "s.indexrelid = i.inhrelid WHERE i.inhparent = "
                      "'turns_by_key_hash'::regclass"),
        ',', absl::SkipEmpty());
    for (const std::string& row : rows) {
      const std::pair<std::string, std::string> parts =
          absl::StrSplit(row, '=');
      ASSERT_TRUE(absl::SimpleAtoi(parts.second, &scans[parts.first])) << row;
    }
    ASSERT_TRUE(scans.contains(near));
  }
  EXPECT_GE(scans.size(), 5u);  // Yesterday to two days ahead, and kT0's.
  for (const auto& [partition, count] : scans) {
    if (partition != near) {
      EXPECT_EQ(count, 0) << partition;
    }
  }
}

// Two stores on one database, as two daemons: the same records written by
// both at once are stored once.
TEST_F(PostgresStoreTest, TwoStoresWritingTheSameTurnsStoreThemOnce) {
  auto first = Open();
  auto second = Open();
  constexpr int kTurns = 200;
  std::atomic<int> failures{0};
  auto write_all = [&](PostgresStore* store) {
    for (int i = 0; i < kTurns; ++i) {
      const LaneKey key = Key(absl::StrCat("s", i % 5));
      const std::string id = absl::StrCat("r", i);
      // Usage first on one, snapshot first on the other: both orders.
      std::vector<StoreWrite> unit = TurnUnit(
          key, id, kT0 + i * kSecond, Classified(key, id, v1::VERDICT_OK));
      if (store == first.get()) std::swap(unit[0], unit[1]);
      const absl::Status written = store->Write(std::move(unit));
      if (!written.ok()) {
        ++failures;
        ADD_FAILURE() << written;
      }
    }
  };
  std::thread a(write_all, first.get());
  std::thread b(write_all, second.get());
  a.join();
  b.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(Query("SELECT count(*) FROM turns"), kTurns);
  EXPECT_EQ(Query("SELECT count(*) FROM turns WHERE snapshot_received = 1 "
                  "AND usage_received = 1 AND verdict = 'ok' AND "
                  "request_time_us = response_time_us - 1000000"),
            kTurns);
}

// The plan the writer's connection makes for `sql` (a write statement of
// pg_write_statements.h with `params` parameters): generic, as the store's
// are, so the parameters' values (NULL here) do not matter. One line a node.
std::vector<std::string> WriterPlan(const std::string& url, const char* sql,
                                    int params) {
  absl::StatusOr<std::unique_ptr<PgConnection>> connection =
      PgConnection::Connect(url, std::chrono::milliseconds(10000));
  EXPECT_TRUE(connection.ok()) << connection.status();
  if (!connection.ok()) return {};
  EXPECT_TRUE(PgSetUpWriterSession(**connection).ok());
  EXPECT_TRUE((*connection)->Prepare("statement", sql).ok());
  std::string explain = "EXPLAIN EXECUTE statement(";
  for (int i = 0; i < params; ++i)
    absl::StrAppend(&explain, i ? "," : "", "NULL");
  absl::StatusOr<PgResult> plan = (*connection)->Query(explain + ")");
  EXPECT_TRUE(plan.ok()) << plan.status();
  std::vector<std::string> lines;
  for (int i = 0; plan.ok() && i < plan->rows(); ++i) {
    lines.emplace_back(plan->row(i).Text(0));
  }
  return lines;
}

// How many scans of a turns partition in `plan` (WriterPlan's lines) have
// no index condition, i.e. read the whole partition.
int WholePartitionScans(const std::vector<std::string>& plan) {
  int whole = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    if (plan[i].find("Scan") == std::string::npos ||
        plan[i].find(" on turns_p") == std::string::npos) {
      continue;
    }
    bool bounded = false;
    for (size_t j = i + 1;
         j < plan.size() && plan[j].find("->") == std::string::npos; ++j) {
      bounded |= plan[j].find("Index Cond:") != std::string::npos;
    }
    whole += !bounded;
  }
  return whole;
}

// Issue 17: the generic plan of the turn lookup looked turns up through
// turns_by_time (or turns_by_lane_time) when it was made while today's
// partition held a few hundred analyzed rows, and kept reading the whole day
// (lane) for every turn as the partition grew. Whatever the statistics, the
// plans of the statements that look a turn up by its key (the lookup of a
// batch's turns, the break statement) read each partition through
// turns_by_key_hash alone, and no scan of a partition in those plans or in
// the update of the turns found (by their full key) reads the whole
// partition (the update's one exception is below), with the store's own 4
// partitions or a 30-day retention's 33.
TEST_F(PostgresStoreTest, TurnLookupsUseTheKeyHashIndexWhateverTheStatistics) {
  struct State {
    int turns;          // Written (one lane in four) before the plan is made.
    bool analyze;       // ANALYZE turns before the plan is made.
    int past_days = 0;  // Partitions of as many days before kT0's, empty.
  };
  constexpr State kStates[] = {{0, false},      {0, true},    {60, true},
                               {300, true},     {1000, true}, {1000, false},
                               {300, false},    {3000, true}, {0, false, 29},
                               {1000, true, 29}};  // 29: a 30-day retention's.
  for (const State& state : kStates) {
    SCOPED_TRACE(absl::StrCat(state.turns, " turns, analyzed: ", state.analyze,
                              ", past days: ", state.past_days));
    const std::string database =
        absl::StrCat(database_, "_", state.turns, state.analyze ? "a" : "",
                     state.past_days ? absl::StrCat("p", state.past_days) : "");
    ASSERT_TRUE(server_->CreateDatabase(database));
    PostgresStoreOptions options = Options();
    options.url = server_->Url(database);
    {
      absl::StatusOr<std::unique_ptr<PostgresStore>> store =
          PostgresStore::Open(options);
      ASSERT_TRUE(store.ok()) << store.status();
      std::vector<StoreWrite> batch;
      for (int i = 0; i < state.turns; ++i) {
        const LaneKey key = Key(absl::StrCat("s", i % 4));
        const std::string id = absl::StrCat("r", i);
        for (StoreWrite& write :
             TurnUnit(key, id, kT0 + i * kSecond,
                      Classified(key, id, v1::VERDICT_OK))) {
          batch.push_back(std::move(write));
        }
        if (batch.size() >= 300 || i + 1 == state.turns) {
          ASSERT_TRUE((*store)->Write(std::move(batch)).ok());
          batch.clear();
        }
      }
    }
    if (state.past_days > 0) {
      absl::StatusOr<std::unique_ptr<PgConnection>> connection =
          PgConnection::Connect(options.url, std::chrono::milliseconds(10000));
      ASSERT_TRUE(connection.ok()) << connection.status();
      std::vector<int64_t> past;
      for (int day = 1; day <= state.past_days; ++day) {
        past.push_back(PgDayOf(kT0) - day);
      }
      ASSERT_TRUE(PgCreatePartitions(**connection, past).ok());
    }
    if (state.analyze) server_->Psql(database, "ANALYZE turns");
    const std::vector<std::string> hash_indexes = absl::StrSplit(
        server_->Psql(database,
                      "SELECT string_agg(c.relname, ',') FROM pg_inherits i "
                      "JOIN pg_class c ON c.oid = i.inhrelid WHERE "
                      "i.inhparent = 'turns_by_key_hash'::regclass"),
        ',', absl::SkipEmpty());
    ASSERT_FALSE(hash_indexes.empty());
    // Every scan of a turns partition in `lines` is an index scan of
    // turns_by_key_hash; returns how many there are.
    auto key_hash_scans = [&](const std::vector<std::string>& lines) {
      int scans = 0;
      for (const std::string& line : lines) {
        if (line.find(" on turns_p") == std::string::npos) continue;
        bool hash = false;
        for (const std::string& index : hash_indexes) {
          hash |= line.find("Index Scan using " + index + " on turns_p") !=
                  std::string::npos;
        }
        EXPECT_TRUE(hash) << line;
        ++scans;
      }
      return scans;
    };
    // The update of the turns found: by their full key, never a whole
    // partition. One exception: while every partition holds at most a few
    // hundred analyzed rows, the planner hashes those rows whole (4-5 small
    // partitions read whole are cheaper to it than a probe per turn); the
    // next ANALYZE, which autovacuum runs every ~10 % of a partition's
    // growth, makes the plan again, and from 1,000 rows on it probes.
    const std::vector<std::string> updates =
        WriterPlan(options.url, kPgUpdateTurns, 42);
    if (!state.analyze || state.turns >= 1000) {
      EXPECT_EQ(WholePartitionScans(updates), 0)
          << absl::StrJoin(updates, "\n");
    }
    // The break statement's check that its turn took the verdict.
    const std::vector<std::string> breaks =
        WriterPlan(options.url, kPgInsertBreak, 37);
    EXPECT_GE(key_hash_scans(breaks), 1);
    EXPECT_EQ(WholePartitionScans(breaks), 0) << absl::StrJoin(breaks, "\n");
    // The lookup that sends new turns to COPY: a probe per turn, always.
    const std::vector<std::string> finds =
        WriterPlan(options.url, kPgFindTurns, 6);
    EXPECT_GE(key_hash_scans(finds), 1) << absl::StrJoin(finds, "\n");
    EXPECT_EQ(WholePartitionScans(finds), 0) << absl::StrJoin(finds, "\n");
  }
}

// A daemon's cached lane is stale once another daemon wrote the lane after
// this one read it: its next write of the lane is refused whole (ABORTED,
// the lane named), nothing of it stored, while the same batch's other lanes
// commit; after reading the lane again, the write goes through. Writes of a
// lane never looked up are not checked.
TEST_F(PostgresStoreTest,
       AWriteOfALaneAnotherStoreWroteSinceItsLookupIsRefused) {
  PostgresStoreOptions options = Options();
  // Long enough that the two writes below share one commit.
  options.max_batch_delay = std::chrono::milliseconds(300);
  absl::StatusOr<std::unique_ptr<PostgresStore>> opened =
      PostgresStore::Open(options);
  ASSERT_TRUE(opened.ok()) << opened.status();
  PostgresStore& a = **opened;
  auto b = Open();
  const LaneKey lane = Key("moved");
  const LaneKey other = Key("stays");
  for (const LaneKey& key : {lane, other}) {
    absl::StatusOr<std::optional<RestoredLane>> none =
        a.LoadLane(key, LaneLookup{});
    ASSERT_TRUE(none.ok()) << none.status();
    EXPECT_FALSE(none->has_value());
  }
  ASSERT_TRUE(
      a.Write(TurnUnit(lane, "r0", kT0, Classified(lane, "r0", v1::VERDICT_OK)))
          .ok());
  // The lane moves to b, which reads it and writes its next turn.
  absl::StatusOr<std::optional<RestoredLane>> read_by_b =
      b->LoadLane(lane, LaneLookup{});
  ASSERT_TRUE(read_by_b.ok() && read_by_b->has_value());
  ASSERT_TRUE(b->Write(TurnUnit(lane, "r1", kT0 + kSecond,
                                Classified(lane, "r1", v1::VERDICT_OK)))
                  .ok());
  // Back on a, whose cache still ends at r0; in the same batch, a lane only
  // a writes.
  absl::Status stale;
  std::thread stale_writer([&] {
    stale = a.Write(TurnUnit(lane, "r2", kT0 + 2 * kSecond,
                             Classified(lane, "r2", v1::VERDICT_OK)));
  });
  const absl::Status fresh = a.Write(
      TurnUnit(other, "o0", kT0, Classified(other, "o0", v1::VERDICT_OK)));
  stale_writer.join();
  EXPECT_TRUE(fresh.ok()) << fresh;
  EXPECT_TRUE(absl::IsAborted(stale)) << stale;
  const std::vector<LaneKey> named = StaleLanesOf(stale);
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0], lane);
  EXPECT_EQ(Query("SELECT count(*) FROM turns WHERE request_id = 'r2'"), 0);
  EXPECT_EQ(Query("SELECT count(*) FROM turns WHERE request_id = 'o0'"), 1);
  EXPECT_FALSE(a.stats().last_commit_failed);

  // Read again, a sees r1 and may write the lane.
  absl::StatusOr<std::optional<RestoredLane>> reread =
      a.LoadLane(lane, LaneLookup{});
  ASSERT_TRUE(reread.ok() && reread->has_value());
  EXPECT_EQ((*reread)->state.last_turn->request_id, "r1");
  EXPECT_TRUE(a.Write(TurnUnit(lane, "r2", kT0 + 2 * kSecond,
                               Classified(lane, "r2", v1::VERDICT_OK)))
                  .ok());
  // b's cache is the stale one now.
  EXPECT_TRUE(absl::IsAborted(b->Write(TurnUnit(
      lane, "r3", kT0 + 3 * kSecond, Classified(lane, "r3", v1::VERDICT_OK)))));
  // A lane b never looked up: unchecked.
  EXPECT_TRUE(b->Write(TurnUnit(other, "o1", kT0 + kSecond,
                                Classified(other, "o1", v1::VERDICT_OK)))
                  .ok());
}

// A commit running past the store's timeout (here: waiting for the lock of
// its lane, which another session holds) is canceled by the server: the
// Write() answers Unavailable naming the timeout, nothing of it is stored
// or acknowledged, and the same write succeeds once the lock is free.
TEST_F(PostgresStoreTest, ACommitPastTheTimeoutIsUnavailableAndStoresNothing) {
  { auto migrated = Open(); }  // Schema and partitions at the usual timeout.
  PostgresStoreOptions options = Options();
  options.timeout = std::chrono::milliseconds(300);
  absl::StatusOr<std::unique_ptr<PostgresStore>> opened =
      PostgresStore::Open(options);
  ASSERT_TRUE(opened.ok()) << opened.status();
  PostgresStore& store = **opened;
  const LaneKey key = Key("locked");
  absl::StatusOr<std::unique_ptr<PgConnection>> holder =
      PgConnection::Connect(options.url, std::chrono::milliseconds(3000));
  ASSERT_TRUE(holder.ok()) << holder.status();
  ASSERT_TRUE(
      (*holder)
          ->Exec(absl::StrCat("SELECT pg_advisory_lock(", PgLaneKey(key), ")"))
          .ok());
  auto turn = [&] {
    return TurnUnit(key, "r0", kT0, Classified(key, "r0", v1::VERDICT_OK));
  };
  const absl::Status timed_out = store.Write(turn());
  EXPECT_TRUE(absl::IsUnavailable(timed_out)) << timed_out;
  EXPECT_NE(timed_out.message().find("statement timeout"), std::string::npos)
      << timed_out;
  EXPECT_NE(timed_out.message().find("store timeout of 300 ms"),
            std::string::npos)
      << timed_out;
  StoreStats stats = store.stats();
  EXPECT_EQ(stats.committed_records, 0);
  EXPECT_EQ(stats.failed_commits, 1);
  EXPECT_TRUE(stats.last_commit_failed);
  ASSERT_TRUE((*holder)->Exec("SELECT pg_advisory_unlock_all()").ok());
  EXPECT_EQ(Query("SELECT count(*) FROM turns"), 0);  // Rolled back.

  const absl::Status retried = store.Write(turn());
  EXPECT_TRUE(retried.ok()) << retried;
  EXPECT_EQ(Query("SELECT count(*) FROM turns WHERE request_id = 'r0'"), 1);
  stats = store.stats();
  EXPECT_EQ(stats.committed_records, 3);
  EXPECT_FALSE(stats.last_commit_failed);
}

// PostgreSQL stops and starts again under load: writes fail with
// Unavailable meanwhile, the store reports itself unhealthy, and every
// write acknowledged before, during and after is stored, once.
TEST_F(PostgresStoreTest, RestartMidRunLosesNothingAcknowledged) {
  auto store = Open();
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::set<std::string> acked;
  std::atomic<int> unavailable{0};
  std::atomic<int> other_errors{0};
  std::vector<std::thread> writers;
  for (int t = 0; t < 3; ++t) {
    writers.emplace_back([&, t] {
      const LaneKey key = Key(absl::StrCat("w", t));
      for (int i = 0; !stop.load(); ++i) {
        const std::string id = absl::StrCat("t", t, "-", i);
        const absl::Status status = store->Write(TurnUnit(
            key, id, kT0 + i * kSecond, Classified(key, id, v1::VERDICT_OK)));
        if (status.ok()) {
          std::lock_guard<std::mutex> lock(mu);
          acked.insert(id);
        } else if (absl::IsUnavailable(status)) {
          ++unavailable;
          absl::SleepFor(absl::Milliseconds(20));
        } else {
          ++other_errors;
          ADD_FAILURE() << status;
        }
      }
    });
  }
  auto acked_count = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return acked.size();
  };
  auto wait_for_acks = [&](size_t more) {
    const size_t target = acked_count() + more;
    for (int i = 0; i < 600 && acked_count() < target; ++i) {
      absl::SleepFor(absl::Milliseconds(50));
    }
    return acked_count() >= target;
  };
  ASSERT_TRUE(wait_for_acks(50));
  ASSERT_TRUE(server_->Stop("immediate"));  // As a crash.
  // Down: writes answer Unavailable, and the store says it is unhealthy.
  for (int i = 0; i < 100 && unavailable.load() == 0; ++i) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_GT(unavailable.load(), 0);
  for (int i = 0; i < 100 && !store->stats().last_commit_failed; ++i) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_TRUE(store->stats().last_commit_failed);
  const absl::Status probed = store->ProbeWritable();
  EXPECT_TRUE(absl::IsUnavailable(probed)) << probed;
  ASSERT_TRUE(server_->Restart());
  // Back: writes succeed again without reopening the store.
  EXPECT_TRUE(wait_for_acks(50));
  stop = true;
  for (std::thread& writer : writers) writer.join();
  EXPECT_EQ(other_errors.load(), 0);
  // Healthy again once the prober reconnects too.
  for (int i = 0; i < 100 && store->stats().last_commit_failed; ++i) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_FALSE(store->stats().last_commit_failed);
  const absl::Status probed_again = store->ProbeWritable();
  EXPECT_TRUE(probed_again.ok()) << probed_again;

  std::set<std::string> stored;
  const std::string out =
      server_->Psql(database_, "SELECT string_agg(request_id, ',') FROM turns");
  const std::vector<std::string> ids =
      absl::StrSplit(out, ',', absl::SkipEmpty());
  for (const std::string& id : ids) {
    EXPECT_TRUE(stored.insert(id).second) << "stored twice: " << id;
  }
  for (const std::string& id : acked) {
    EXPECT_TRUE(stored.contains(id)) << "acknowledged but lost: " << id;
  }
}

// The store's health probe answers for the server as it is now: a server
// back since the probe last failed is found writable at once, however far
// the failed attempts before pushed the pool's reconnect backoff (to 1 s
// after five of them; a PostgreSQL restart takes less here).
TEST_F(PostgresStoreTest, ProbeWritableFindsARestartedServerAtOnce) {
  auto store = Open();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->ProbeWritable().ok());
  ASSERT_TRUE(server_->Stop("immediate"));
  for (int i = 0; i < 5; ++i) {
    const absl::Status probed = store->ProbeWritable();
    EXPECT_TRUE(absl::IsUnavailable(probed)) << probed;
  }
  ASSERT_TRUE(server_->Restart());
  const absl::Status probed = store->ProbeWritable();
  EXPECT_TRUE(probed.ok()) << probed;
}

// Acquire() answers at once while the pool backs off from a failed
// connection attempt; AcquireNow() attempts the connection every time.
TEST(PgPoolTest, AcquireNowAttemptsTheConnectionWhileBackingOff) {
  PgPool pool("postgresql://postgres@127.0.0.1:1/none", 2,
              std::chrono::milliseconds(3000), nullptr);
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<PgPool::Lease> lease = pool.AcquireNow();
    ASSERT_TRUE(absl::IsUnavailable(lease.status())) << lease.status();
    EXPECT_NE(lease.status().message().find("cannot connect"),
              std::string::npos)
        << lease.status();
    EXPECT_EQ(lease.status().message().find("retrying"), std::string::npos)
        << lease.status();
    EXPECT_TRUE(pool.backing_off());
  }
}

// A server that completes the start-up (no authentication, ready for a
// query) and then never answers: Connect's own statement (statement_timeout)
// is given up on after the timeout and its grace, Unavailable, not waited
// on for ever. The loopback stand-in speaks the protocol's first messages.
TEST(PgConnectionTest, AServerThatNeverAnswersIsGivenUpOn) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), length), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  ASSERT_EQ(
      getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length), 0);
  std::atomic<bool> queried{false};
  std::thread server([listener, &queried] {
    const int client = accept(listener, nullptr, nullptr);
    if (client < 0) return;
    char buffer[4096];
    // The start-up packet (sslmode and gssencmode are off: no request
    // before it), then AuthenticationOk and ReadyForQuery.
    if (read(client, buffer, sizeof(buffer)) > 0) {
      static constexpr char kReady[] = {'R', 0,   0, 0, 8, 0, 0,  0,
                                        0,   'Z', 0, 0, 0, 5, 'I'};
      if (write(client, kReady, sizeof(kReady)) == sizeof(kReady)) {
        // The query arrives; no answer ever goes back. Read until the
        // client closes the connection.
        while (read(client, buffer, sizeof(buffer)) > 0) queried = true;
      }
    }
    close(client);
  });
  const std::string url =
      absl::StrCat("postgresql://postgres@127.0.0.1:", ntohs(address.sin_port),
                   "/none?sslmode=disable&gssencmode=disable");
  absl::StatusOr<std::unique_ptr<PgConnection>> connection =
      PgConnection::Connect(url, std::chrono::milliseconds(200));
  EXPECT_TRUE(absl::IsUnavailable(connection.status())) << connection.status();
  EXPECT_NE(connection.status().message().find("did not answer"),
            std::string::npos)
      << connection.status();
  server.join();  // Connect closed the connection when it gave up.
  close(listener);
  EXPECT_TRUE(queried.load());
}

}  // namespace
}  // namespace cachewatch::testing
