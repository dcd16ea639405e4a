// query_bench: the postmortem queries on a store of 10 M turns.
//
// Builds a store with the store's own schema (SqliteStore::Open runs the
// migrations), then fills it with --turns turns as the daemon would have
// written them over 30 days ending now: ~50 turns per lane, one to three
// lanes per session, 12 agents, 5 models, 64 distinct tool lists of 40-60
// tools (MCP-style names), snapshot, usage and verdict columns in the
// store's layouts (columns.h), and ~5 % breaks with the reasons' usual mix
// (TTL expiry after a long gap, tool order flips, schema edits, system and
// message changes, model switches), each with its serialized event. Rows are
// written in request-time order, as they arrive, by the store's own
// statements (daemon/store/sqlite/write_statements.h: a turn's snapshot, usage
// and verdict upserts, a break's insert) in large transactions; the secondary
// indexes are dropped first and recreated from the schema's own SQL
// afterwards (the unique key stays throughout).
//
// Then times, on a fresh read-only connection, every dashboards/sql/*.sql
// file (not the *.pg.sql variants, which are PostgreSQL's) over the last 24
// hours (the files' default window, bound explicitly as :since_us relative to
// the newest turn, since the database may be older than the run) and over the
// whole store (:since_us = 0), printing each one's EXPLAIN QUERY PLAN; and the
// daemon's own queries through SqliteStore: ListBreaks (first page; by agent;
// by agent and reason; by session; the next page), ExplainBreak, LaneTimeline,
// FindClassification and LoadRecentLanes (a restart). Each is run
// kRepeats times; the slowest run is reported and checked against the
// target (< 1 s).
//
// Usage: query_bench --sql_dir=DIR [--turns=N] [--db=PATH]
//   --db keeps the database at PATH and reuses it when it exists (delete it
//   to rebuild; bench_run names it after the generator's version); without
//   it a temporary one is built and removed. Building 10 M turns takes
//   minutes (docs/PERFORMANCE.md).
#include <google/protobuf/util/time_util.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "daemon/core/classifier.h"
#include "daemon/core/provider_traits.h"
#include "daemon/store/columns.h"
#include "daemon/store/sqlite/sqlite_store.h"
#include "daemon/store/sqlite/write_statements.h"
#include "daemon/util/temp_dir.h"

namespace cachewatch::bench {
namespace {

using Clock = std::chrono::steady_clock;
using google::protobuf::util::TimeUtil;

constexpr int64_t kSecondUs = 1'000'000;
constexpr int64_t kSpanUs = 30LL * 24 * 3600 * kSecondUs;
constexpr int kTurnsPerLane = 50;
constexpr int kAgents = 12;
constexpr int kToolLists = 64;
constexpr int kRowsPerTransaction = 200'000;
constexpr int kRepeats = 3;
constexpr double kTargetSeconds = 1.0;

const char* const kModels[] = {"claude-sonnet-4-5", "claude-opus-4-1",
                               "claude-haiku-4-5", "gpt-5", "gemini-2.5-pro"};
const char* const kServers[] = {"github",   "slack",      "linear",
                                "postgres", "filesystem", "browser"};

// A fixed pseudo-random 64-bit value for `seed` (splitmix64).
uint64_t Mix(uint64_t seed) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void Check(int rc, sqlite3* db, const char* what) {
  if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
    std::fprintf(stderr, "query_bench: %s: %s\n", what, sqlite3_errmsg(db));
    std::exit(1);
  }
}

void Exec(sqlite3* db, const std::string& sql) {
  Check(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), db,
        sql.c_str());
}

sqlite3_stmt* Prepare(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* statement = nullptr;
  Check(sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr), db,
        sql.c_str());
  return statement;
}

// A prepared INSERT whose named parameters are looked up once each.
struct Insert {
  sqlite3_stmt* statement;
  std::unordered_map<const char*, int> indexes;  // By name literal.

  int Index(const char* name) {
    auto [it, inserted] = indexes.try_emplace(name, 0);
    if (inserted) it->second = sqlite3_bind_parameter_index(statement, name);
    return it->second;
  }
};

void BindText(Insert& s, const char* name, const std::string& value) {
  sqlite3_bind_text(s.statement, s.Index(name), value.data(),
                    static_cast<int>(value.size()), SQLITE_TRANSIENT);
}
void BindInt(Insert& s, const char* name, int64_t value) {
  sqlite3_bind_int64(s.statement, s.Index(name), value);
}
void BindDouble(Insert& s, const char* name, double value) {
  sqlite3_bind_double(s.statement, s.Index(name), value);
}
void BindBlob(Insert& s, const char* name, const std::string& value) {
  sqlite3_bind_blob(s.statement, s.Index(name), value.data(),
                    static_cast<int>(value.size()), SQLITE_TRANSIENT);
}
void Step(sqlite3* db, sqlite3_stmt* s) {
  Check(sqlite3_step(s), db, sqlite3_sql(s));
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
}

// What a turn of the generated fleet is.
enum class Kind { kOk, kColdStart, kBreak };

struct Lane {
  LaneKey key;
  int agent = 0;
  int model = 0;
  int tool_list = 0;
  int turns = 0;
  int64_t start_us = 0;
};

// Binds the key of a turn row: its lane's and its request id.
void BindTurnKey(Insert& s, const Lane& lane, const std::string& request_id) {
  BindText(s, ":agent", lane.key.agent);
  BindText(s, ":session_id", lane.key.session_id);
  BindText(s, ":lane", lane.key.lane);
  BindText(s, ":request_id", request_id);
}

// The reason of a break turn, drawn with the usual mix.
v1::Reason ReasonFor(uint64_t draw) {
  const int p = static_cast<int>(draw % 100);
  if (p < 30) return v1::REASON_TTL_EXPIRED;
  if (p < 50) return v1::REASON_TOOLS_ORDER_CHANGED;
  if (p < 65) return v1::REASON_TOOLS_SCHEMA_CHANGED;
  if (p < 75) return v1::REASON_SYSTEM_CHANGED;
  if (p < 85) return v1::REASON_MESSAGES_CHANGED;
  if (p < 90) return v1::REASON_MODEL_CHANGED;
  if (p < 95) return v1::REASON_TOOLS_ADDED;
  return v1::REASON_LIKELY_PROVIDER_EVICTION;
}

// Turn `seq` of a lane: a break on ~5 % of the turns after the first.
Kind KindOf(uint64_t lane_seed, int seq) {
  if (seq == 0) return Kind::kColdStart;
  return Mix(lane_seed ^ (static_cast<uint64_t>(seq) << 40)) % 20 == 0
             ? Kind::kBreak
             : Kind::kOk;
}

// The gap before turn `seq`: 5-90 s, or 6-90 min before a TTL break.
int64_t GapUs(uint64_t lane_seed, int seq) {
  const uint64_t draw = Mix(lane_seed ^ (static_cast<uint64_t>(seq) << 20));
  if (KindOf(lane_seed, seq) == Kind::kBreak &&
      ReasonFor(draw >> 8) == v1::REASON_TTL_EXPIRED) {
    return (360 + static_cast<int64_t>(draw % 5040)) * kSecondUs;
  }
  return (5 + static_cast<int64_t>(draw % 86)) * kSecondUs;
}

std::vector<v1::ToolRef> MakeToolList(int list) {
  std::vector<v1::ToolRef> tools;
  const int count = 40 + list % 21;
  for (int i = 0; i < count; ++i) {
    v1::ToolRef tool;
    if (i < 8) {
      static const char* const kBuiltins[] = {"Read",     "Write",    "Edit",
                                              "Bash",     "Grep",     "Glob",
                                              "WebFetch", "TodoWrite"};
      tool.set_name(kBuiltins[i]);
    } else {
      tool.set_name("mcp__" + std::string(kServers[(i + list) % 6]) +
                    "__tool_" + std::to_string(i));
    }
    tool.set_schema_hash(Mix(list * 1000 + i));
    tools.push_back(tool);
  }
  return tools;
}

class Generator {
 public:
  Generator(sqlite3* db, int64_t turns, int64_t end_us)
      : db_(db), turns_(turns), end_us_(end_us) {}

  void Run() {
    // No journal while generating (nothing to recover: a failed run is
    // started over); the store's WAL mode is restored at the end.
    Exec(db_,
         "PRAGMA journal_mode=OFF; PRAGMA locking_mode=EXCLUSIVE; "
         "PRAGMA synchronous=OFF; PRAGMA cache_size=-2000000; "
         "PRAGMA temp_store=MEMORY");
    DropIndexes();
    Exec(db_, "BEGIN");
    InsertToolLists();
    MakeLanes();
    InsertTurns();
    Exec(db_, "COMMIT");
    const auto start = Clock::now();
    for (const std::string& sql : indexes_) Exec(db_, sql);
    // No ANALYZE: the daemon never runs it, so the planner works without
    // statistics here too.
    Exec(db_, "PRAGMA locking_mode=NORMAL; PRAGMA journal_mode=WAL");
    std::printf("  indexes recreated in %.1f s\n",
                std::chrono::duration<double>(Clock::now() - start).count());
  }

 private:
  void DropIndexes() {
    sqlite3_stmt* s = Prepare(
        db_,
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND "
        "sql IS NOT NULL AND tbl_name IN ('turns', 'prompt_cache_breaks')");
    std::vector<std::string> names;
    while (sqlite3_step(s) == SQLITE_ROW) {
      names.emplace_back(
          reinterpret_cast<const char*>(sqlite3_column_text(s, 0)));
      indexes_.emplace_back(
          reinterpret_cast<const char*>(sqlite3_column_text(s, 1)));
    }
    sqlite3_finalize(s);
    for (const std::string& name : names) Exec(db_, "DROP INDEX " + name);
  }

  void InsertToolLists() {
    Insert list{Prepare(db_, kInsertToolList), {}};
    Insert entry{Prepare(db_, kInsertToolEntry), {}};
    for (int i = 0; i < kToolLists; ++i) {
      tools_.push_back(MakeToolList(i));
      google::protobuf::RepeatedPtrField<v1::ToolRef> field(tools_[i].begin(),
                                                            tools_[i].end());
      list_hashes_.push_back(ToolListHash(field));
      BindText(list, ":list_hash", list_hashes_[i]);
      BindInt(list, ":tool_count", static_cast<int64_t>(tools_[i].size()));
      Step(db_, list.statement);
      for (size_t p = 0; p < tools_[i].size(); ++p) {
        BindText(entry, ":list_hash", list_hashes_[i]);
        BindInt(entry, ":position", static_cast<int64_t>(p));
        BindText(entry, ":name", tools_[i][p].name());
        BindText(entry, ":schema_hash", Hex64(tools_[i][p].schema_hash()));
        Step(db_, entry.statement);
      }
    }
    sqlite3_finalize(list.statement);
    sqlite3_finalize(entry.statement);
  }

  void MakeLanes() {
    std::mt19937_64 random(42);
    int64_t remaining = turns_;
    int64_t session = 0;
    while (remaining > 0) {
      const int lanes_in_session = 1 + static_cast<int>(random() % 3);
      const int agent = static_cast<int>(random() % kAgents);
      for (int l = 0; l < lanes_in_session && remaining > 0; ++l) {
        Lane lane;
        lane.agent = agent;
        lane.key.agent = "agent-" + std::to_string(agent);
        char id[64];
        std::snprintf(id, sizeof(id), "%08llx-7c1e-4d2a-9b3f-%012llx",
                      static_cast<unsigned long long>(Mix(session) >> 32),
                      static_cast<unsigned long long>(session));
        lane.key.session_id = id;
        lane.key.lane = l == 0 ? "main" : "subagent-" + std::to_string(l);
        lane.model = static_cast<int>(random() % 5);
        lane.tool_list =
            (agent * 5 + static_cast<int>(random() % 5)) % kToolLists;
        lane.turns = static_cast<int>(std::min<int64_t>(
            remaining, kTurnsPerLane / 2 + random() % kTurnsPerLane));
        lane.start_us =
            end_us_ - kSpanUs +
            static_cast<int64_t>(random() % (kSpanUs - 3600 * kSecondUs));
        remaining -= lane.turns;
        lanes_.push_back(std::move(lane));
      }
      ++session;
    }
  }

  struct Due {
    int64_t time_us;
    uint32_t lane;
    uint32_t seq;
  };

  void InsertTurns() {
    std::vector<Due> schedule;
    schedule.reserve(turns_);
    for (uint32_t i = 0; i < lanes_.size(); ++i) {
      int64_t time_us = lanes_[i].start_us;
      for (int seq = 0; seq < lanes_[i].turns; ++seq) {
        if (seq > 0) time_us += GapUs(i, seq);
        schedule.push_back({time_us, i, static_cast<uint32_t>(seq)});
      }
    }
    std::sort(schedule.begin(), schedule.end(),
              [](const Due& a, const Due& b) { return a.time_us < b.time_us; });
    Insert snapshot{Prepare(db_, kUpsertSnapshot), {}};
    Insert usage{Prepare(db_, kUpsertUsage), {}};
    Insert classification{Prepare(db_, kUpsertClassification), {}};
    Insert brk{Prepare(db_, kInsertBreak), {}};

    // What depends only on the turn's position in its lane, once.
    const std::string sections = SectionsJson(SystemSections());
    const std::string options_hash = Hex64(Mix(7));
    std::vector<std::string> breakpoints_json;
    std::vector<std::string> chains;
    std::vector<std::string> request_ids;
    for (int seq = 0; seq < 2 * kTurnsPerLane; ++seq) {
      google::protobuf::RepeatedPtrField<v1::Breakpoint> breakpoints;
      v1::Breakpoint* breakpoint = breakpoints.Add();
      breakpoint->set_segment(v1::PROMPT_SEGMENT_MESSAGES);
      breakpoint->set_index(static_cast<uint32_t>(std::min(2 * seq, 63)));
      breakpoints_json.push_back(BreakpointsJson(breakpoints));
      google::protobuf::RepeatedField<uint64_t> chain;
      for (int b = 0; b < std::min(2 * seq + 1, 64); ++b) chain.Add(Mix(b));
      chains.push_back(ChainBlob(chain));
      request_ids.push_back("req_" + std::to_string(seq));
    }
    std::vector<std::string> system_hashes;
    for (int agent = 0; agent < kAgents; ++agent) {
      system_hashes.push_back(Hex64(Mix(agent)));
    }
    std::vector<int64_t> previous_time(lanes_.size(), 0);
    int64_t rows = 0;
    const auto start = Clock::now();
    for (const Due& due : schedule) {
      const Lane& lane = lanes_[due.lane];
      const int seq = static_cast<int>(due.seq);
      const Kind kind = KindOf(due.lane, seq);
      const std::string& request_id = request_ids[seq];
      const int64_t prompt = 20'000 + 800 * std::min(seq, 60);
      const int64_t expected = seq == 0 ? 0 : prompt - 800;
      const int64_t read = kind == Kind::kOk ? expected : 0;
      const int64_t write = prompt - read - 12;
      const int tool_list =
          (lane.tool_list + (kind == Kind::kBreak ? 1 : 0)) % kToolLists;

      const int64_t response_us = due.time_us + 4 * kSecondUs;
      BindTurnKey(snapshot, lane, request_id);
      BindText(snapshot, ":provider", "anthropic");
      BindText(snapshot, ":model", kModels[lane.model]);
      BindInt(snapshot, ":request_time_us", due.time_us);
      BindText(snapshot, ":system_hash", system_hashes[lane.agent]);
      BindText(snapshot, ":system_sections", sections);
      BindText(snapshot, ":tool_list_hash", list_hashes_[tool_list]);
      BindInt(snapshot, ":tool_count",
              static_cast<int64_t>(tools_[tool_list].size()));
      BindText(snapshot, ":options_hash", options_hash);
      BindInt(snapshot, ":cache_enabled", 1);
      BindInt(snapshot, ":cache_automatic", 0);
      BindInt(snapshot, ":cache_ttl_seconds", 300);
      BindText(snapshot, ":breakpoints", breakpoints_json[seq]);
      BindBlob(snapshot, ":message_chain", chains[seq]);
      BindText(snapshot, ":tool_order_policy", "lexicographic");
      BindInt(snapshot, ":received_at_us", response_us);

      BindTurnKey(usage, lane, request_id);
      BindText(usage, ":provider", "anthropic");
      BindText(usage, ":model", kModels[lane.model]);
      BindInt(usage, ":response_time_us", response_us);
      BindInt(usage, ":uncached_input_tokens", 12);
      BindInt(usage, ":cache_read_tokens", read);
      BindInt(usage, ":cache_write_tokens", write);
      BindInt(usage, ":cache_write_5m_tokens", write);
      BindInt(usage, ":cache_write_1h_tokens", 0);
      BindInt(usage, ":output_tokens", 350);
      BindInt(usage, ":prompt_total_tokens", prompt);
      BindText(usage, ":raw_usage_json",
               "{\"input_tokens\":12,\"cache_creation_input_tokens\":" +
                   std::to_string(write) +
                   ",\"cache_read_input_tokens\":" + std::to_string(read) +
                   ",\"cache_creation\":{\"ephemeral_5m_input_tokens\":" +
                   std::to_string(write) +
                   ",\"ephemeral_1h_input_tokens\":0},\"output_tokens\":350,"
                   "\"service_tier\":\"standard\"}");
      BindInt(usage, ":received_at_us", response_us);

      BindTurnKey(classification, lane, request_id);
      BindInt(classification, ":request_time_us", due.time_us);
      BindText(classification, ":verdict",
               kind == Kind::kBreak       ? "break"
               : kind == Kind::kColdStart ? "cold_start"
                                          : "ok");
      BindInt(classification, ":expected_reuse_tokens", expected);
      BindInt(classification, ":missed_tokens", expected - read);
      BindInt(classification, ":received_at_us", response_us);
      if (kind == Kind::kBreak) {
        const v1::PromptCacheBreak event =
            BreakOf(lane, due, request_id, previous_time[due.lane], expected,
                    prompt, write, tool_list);
        BindText(classification, ":primary_reason",
                 ReasonName(event.primary_reason()));
        BindText(classification, ":break_id", event.break_id());
        InsertBreak(brk, lane, event);
        ++rows;
      }
      // One turn row, written as the daemon writes it: the snapshot inserts
      // it, the usage and the verdict fill it in.
      Step(db_, snapshot.statement);
      Step(db_, usage.statement);
      Step(db_, classification.statement);
      previous_time[due.lane] = due.time_us;
      if (++rows % kRowsPerTransaction == 0) Exec(db_, "COMMIT; BEGIN");
    }
    sqlite3_finalize(snapshot.statement);
    sqlite3_finalize(usage.statement);
    sqlite3_finalize(classification.statement);
    sqlite3_finalize(brk.statement);
    const double seconds =
        std::chrono::duration<double>(Clock::now() - start).count();
    std::printf(
        "  %lld turns in %zu lanes, %lld rows in %.1f s (%.0f rows/s)\n",
        static_cast<long long>(schedule.size()), lanes_.size(),
        static_cast<long long>(rows), seconds, rows / seconds);
  }

  static google::protobuf::RepeatedPtrField<v1::SystemSection>
  SystemSections() {
    google::protobuf::RepeatedPtrField<v1::SystemSection> sections;
    for (const char* name : {"identity", "environment", "instructions"}) {
      v1::SystemSection* section = sections.Add();
      section->set_name(name);
      section->set_hash(Mix(name[0]));
    }
    return sections;
  }

  v1::PromptCacheBreak BreakOf(const Lane& lane, const Due& due,
                               const std::string& request_id,
                               int64_t previous_us, int64_t expected,
                               int64_t prompt, int64_t write,
                               int tool_list) const {
    const uint64_t draw =
        Mix(due.lane ^ (static_cast<uint64_t>(due.seq) << 20));
    const v1::Reason reason = ReasonFor(draw >> 8);
    v1::PromptCacheBreak event;
    event.set_break_id(BreakIdFor(lane.key, request_id));
    event.set_agent(lane.key.agent);
    event.set_session_id(lane.key.session_id);
    event.set_lane(lane.key.lane);
    event.set_provider(v1::PROVIDER_ANTHROPIC);
    event.set_previous_request_id("req_" + std::to_string(due.seq - 1));
    event.set_request_id(request_id);
    event.set_previous_model(
        kModels[reason == v1::REASON_MODEL_CHANGED ? (lane.model + 1) % 5
                                                   : lane.model]);
    event.set_model(kModels[lane.model]);
    event.set_primary_reason(reason);
    event.add_reasons(reason);
    event.set_evidence(reason == v1::REASON_TTL_EXPIRED ||
                               reason == v1::REASON_LIKELY_PROVIDER_EVICTION
                           ? v1::EVIDENCE_PROVIDER_SUSPECTED
                           : v1::EVIDENCE_CLIENT_EXPLAINED);
    event.set_previous_cache_read_tokens(expected - 800);
    event.set_current_cache_read_tokens(0);
    event.set_expected_reuse_tokens(expected);
    event.set_missed_tokens(expected);
    event.set_prompt_total_tokens(prompt);
    event.set_cache_write_tokens(write);
    const std::vector<v1::ToolRef>& tools = tools_[tool_list];
    const int moved = static_cast<int>(draw % tools.size());
    event.set_first_changed_tool_index(-1);
    if (reason == v1::REASON_TOOLS_ORDER_CHANGED) {
      for (int i = 0; i < 2; ++i) {
        const std::string& name = tools[(moved + i) % tools.size()].name();
        event.add_reordered_tool_names(name);
        event.add_changed_tool_names(name);
      }
      event.set_first_changed_tool_index(moved);
    } else if (reason == v1::REASON_TOOLS_SCHEMA_CHANGED) {
      event.add_schema_changed_tool_names(tools[moved].name());
      event.add_changed_tool_names(tools[moved].name());
      event.set_first_changed_tool_index(moved);
    } else if (reason == v1::REASON_TOOLS_ADDED) {
      event.add_added_tool_names("mcp__extra__tool_" +
                                 std::to_string(draw % 7));
    } else if (reason == v1::REASON_SYSTEM_CHANGED) {
      event.add_changed_system_sections("environment");
    }
    event.set_gap_seconds(static_cast<double>(due.time_us - previous_us) /
                          kSecondUs);
    event.set_ttl_seconds(300);
    event.set_ttl_source(v1::TTL_SOURCE_CACHE_CONTROL);
    *event.mutable_previous_request_time() =
        TimeUtil::MicrosecondsToTimestamp(previous_us);
    *event.mutable_request_time() =
        TimeUtil::MicrosecondsToTimestamp(due.time_us);
    return event;
  }

  void InsertBreak(Insert& s, const Lane& lane,
                   const v1::PromptCacheBreak& event) {
    BindText(s, ":break_id", event.break_id());
    BindText(s, ":agent", lane.key.agent);
    BindText(s, ":session_id", lane.key.session_id);
    BindText(s, ":lane", lane.key.lane);
    BindText(s, ":provider", "anthropic");
    BindText(s, ":previous_request_id", event.previous_request_id());
    BindText(s, ":request_id", event.request_id());
    BindText(s, ":previous_model", event.previous_model());
    BindText(s, ":model", event.model());
    BindText(s, ":primary_reason", ReasonName(event.primary_reason()));
    BindText(s, ":reasons", ReasonsJson(event.reasons()));
    BindText(s, ":evidence", EnumText(event.evidence()));
    BindInt(s, ":previous_cache_read_tokens",
            event.previous_cache_read_tokens());
    BindInt(s, ":current_cache_read_tokens", event.current_cache_read_tokens());
    BindInt(s, ":expected_reuse_tokens", event.expected_reuse_tokens());
    BindInt(s, ":missed_tokens", event.missed_tokens());
    BindInt(s, ":prompt_total_tokens", event.prompt_total_tokens());
    BindInt(s, ":cache_write_tokens", event.cache_write_tokens());
    BindText(s, ":changed_tool_names", NamesJson(event.changed_tool_names()));
    BindText(s, ":added_tool_names", NamesJson(event.added_tool_names()));
    BindText(s, ":removed_tool_names", NamesJson(event.removed_tool_names()));
    BindText(s, ":reordered_tool_names",
             NamesJson(event.reordered_tool_names()));
    BindText(s, ":schema_changed_tool_names",
             NamesJson(event.schema_changed_tool_names()));
    BindText(s, ":changed_system_sections",
             NamesJson(event.changed_system_sections()));
    BindInt(s, ":first_changed_tool_index", event.first_changed_tool_index());
    // -1 (no message block changed), as the generated stores always had it;
    // the event leaves the field unset.
    BindInt(s, ":first_changed_message_block", -1);
    BindInt(s, ":blocks_since_last_write", event.blocks_since_last_write());
    BindDouble(s, ":gap_seconds", event.gap_seconds());
    BindInt(s, ":ttl_seconds", event.ttl_seconds());
    BindText(s, ":ttl_source", EnumText(event.ttl_source()));
    BindInt(s, ":previous_request_time_us",
            TimeUtil::TimestampToMicroseconds(event.previous_request_time()));
    BindInt(s, ":request_time_us",
            TimeUtil::TimestampToMicroseconds(event.request_time()));
    BindBlob(s, ":event", event.SerializeAsString());
    Step(db_, s.statement);
  }

  sqlite3* const db_;
  const int64_t turns_;
  const int64_t end_us_;
  std::vector<std::string> indexes_;
  std::vector<std::vector<v1::ToolRef>> tools_;
  std::vector<std::string> list_hashes_;
  std::vector<Lane> lanes_;
};

// Runs `query` kRepeats times; returns the slowest run in seconds.
double Slowest(const std::function<void()>& query) {
  double slowest = 0;
  for (int i = 0; i < kRepeats; ++i) {
    const auto start = Clock::now();
    query();
    slowest = std::max(
        slowest, std::chrono::duration<double>(Clock::now() - start).count());
  }
  return slowest;
}

struct Result {
  std::string name;
  double seconds = 0;
  int64_t rows = 0;
};

std::vector<Result> results;

void Report(const std::string& name, double seconds, int64_t rows) {
  results.push_back({name, seconds, rows});
}

// Binds `params` by name; every other parameter stays NULL.
void BindParams(
    sqlite3_stmt* s,
    const std::vector<std::pair<std::string, std::string>>& params) {
  for (const auto& [name, value] : params) {
    const int index = sqlite3_bind_parameter_index(s, name.c_str());
    if (index > 0) {
      sqlite3_bind_text(s, index, value.c_str(), -1, SQLITE_TRANSIENT);
    }
  }
}

void RunSqlFile(sqlite3* db, const std::filesystem::path& path,
                const std::string& label,
                const std::vector<std::pair<std::string, std::string>>& params,
                bool print_plan) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  const std::string sql = text.str();
  if (print_plan) {
    sqlite3_stmt* plan = Prepare(db, "EXPLAIN QUERY PLAN " + sql);
    BindParams(plan, params);
    std::printf("\n%s: EXPLAIN QUERY PLAN\n", path.filename().c_str());
    while (sqlite3_step(plan) == SQLITE_ROW) {
      std::printf("  %4d %4d  %s\n", sqlite3_column_int(plan, 0),
                  sqlite3_column_int(plan, 1),
                  reinterpret_cast<const char*>(sqlite3_column_text(plan, 3)));
    }
    sqlite3_finalize(plan);
  }
  int64_t rows = 0;
  const double seconds = Slowest([&] {
    sqlite3_stmt* s = Prepare(db, sql);
    BindParams(s, params);
    rows = 0;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) ++rows;
    Check(rc, db, path.c_str());
    sqlite3_finalize(s);
  });
  Report(path.filename().string() + " (" + label + ")", seconds, rows);
}

std::string FirstText(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* s = Prepare(db, sql);
  std::string value;
  if (sqlite3_step(s) == SQLITE_ROW) {
    value = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
  }
  sqlite3_finalize(s);
  return value;
}

template <typename T>
void Expect(const absl::StatusOr<T>& result, const char* what) {
  if (!result.ok()) {
    std::fprintf(stderr, "query_bench: %s: %s\n", what,
                 result.status().ToString().c_str());
    std::exit(1);
  }
}

void RunStoreQueries(const std::string& path, sqlite3* db, int64_t now_us) {
  StoreOptions options;
  options.path = path;
  absl::StatusOr<std::unique_ptr<SqliteStore>> opened =
      SqliteStore::Open(options);
  Expect(opened, "SqliteStore::Open");
  SqliteStore& store = **opened;

  // Breaks and lanes picked from the last day, as a postmortem would.
  const std::string recent = std::to_string(now_us - 24 * 3600 * kSecondUs);
  sqlite3_stmt* picks =
      Prepare(db,
              "SELECT break_id, agent, session_id, lane, request_id FROM "
              "prompt_cache_breaks WHERE request_time_us >= " +
                  recent + " ORDER BY break_id LIMIT 10");
  std::vector<std::vector<std::string>> breaks;
  while (sqlite3_step(picks) == SQLITE_ROW) {
    std::vector<std::string> row;
    for (int i = 0; i < 5; ++i) {
      row.emplace_back(
          reinterpret_cast<const char*>(sqlite3_column_text(picks, i)));
    }
    breaks.push_back(std::move(row));
  }
  sqlite3_finalize(picks);
  if (breaks.empty()) {
    std::fprintf(stderr, "query_bench: no break in the last day\n");
    std::exit(1);
  }

  int64_t rows = 0;
  const auto list = [&](const char* name, v1::ListBreaksRequest request) {
    const double seconds = Slowest([&] {
      absl::StatusOr<v1::ListBreaksResponse> response =
          store.ListBreaks(request);
      Expect(response, name);
      rows = response->breaks_size();
    });
    Report(name, seconds, rows);
  };
  list("ListBreaks: first page", v1::ListBreaksRequest());
  v1::ListBreaksRequest by_agent;
  by_agent.set_agent(breaks[0][1]);
  list("ListBreaks: agent", by_agent);
  v1::ListBreaksRequest by_reason = by_agent;
  by_reason.set_reason(v1::REASON_TOOLS_ORDER_CHANGED);
  list("ListBreaks: agent + reason", by_reason);
  v1::ListBreaksRequest by_session = by_agent;
  by_session.set_session_id(breaks[0][2]);
  list("ListBreaks: session", by_session);
  absl::StatusOr<v1::ListBreaksResponse> first =
      store.ListBreaks(v1::ListBreaksRequest());
  Expect(first, "ListBreaks");
  v1::ListBreaksRequest next;
  next.set_page_token(first->next_page_token());
  list("ListBreaks: next page", next);

  double slowest = 0;
  for (const auto& b : breaks) {
    slowest = std::max(slowest, Slowest([&] {
                         Expect(store.ExplainBreak(b[0]), "ExplainBreak");
                       }));
  }
  Report("ExplainBreak (10 breaks)", slowest, 1);
  slowest = 0;
  for (const auto& b : breaks) {
    const LaneKey key{b[1], b[2], b[3]};
    slowest = std::max(slowest, Slowest([&] {
                         absl::StatusOr<v1::GetLaneTimelineResponse> timeline =
                             store.LaneTimeline(key, 0);
                         Expect(timeline, "LaneTimeline");
                         rows = timeline->turns_size();
                       }));
  }
  Report("GetLaneTimeline (10 lanes)", slowest, rows);
  slowest = 0;
  for (const auto& b : breaks) {
    const LaneKey key{b[1], b[2], b[3]};
    slowest = std::max(slowest, Slowest([&] {
                         Expect(store.FindClassification(key, b[4]),
                                "FindClassification");
                       }));
  }
  Report("FindClassification (10 turns)", slowest, 1);
  const double restore = Slowest([&] {
    absl::StatusOr<std::vector<RestoredLane>> lanes =
        store.LoadRecentLanes(now_us - 3600 * kSecondUs);
    Expect(lanes, "LoadRecentLanes");
    rows = static_cast<int64_t>(lanes->size());
  });
  Report("LoadRecentLanes (restart, last hour)", restore, rows);
}

int Main(int argc, char** argv) {
  int64_t turns = 10'000'000;
  std::string db_path;
  std::string sql_dir;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--turns=", 0) == 0) {
      turns = std::atoll(arg.c_str() + 8);
    } else if (arg.rfind("--db=", 0) == 0) {
      db_path = arg.substr(5);
    } else if (arg.rfind("--sql_dir=", 0) == 0) {
      sql_dir = arg.substr(10);
    } else {
      std::fprintf(
          stderr, "usage: query_bench --sql_dir=DIR [--turns=N] [--db=PATH]\n");
      return 2;
    }
  }
  if (sql_dir.empty()) {
    std::fprintf(stderr, "query_bench: --sql_dir is required\n");
    return 2;
  }
  std::optional<TempDir> temporary;
  if (db_path.empty()) {
    temporary.emplace("cachewatch-query-bench");
    db_path = temporary->File("bench.db");
  }
  const int64_t now_us =
      std::chrono::duration_cast<std::chrono::microseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count();

  std::printf("\nPostmortem queries on a store of %lld turns (%s)\n",
              static_cast<long long>(turns), db_path.c_str());
  sqlite3* db = nullptr;
  if (!std::filesystem::exists(db_path)) {
    // Built under another name and renamed when complete, so that an
    // interrupted run is never reused.
    const std::string partial = db_path + ".partial";
    for (const char* suffix : {"", "-wal", "-shm"}) {
      std::filesystem::remove(partial + suffix);
    }
    {
      StoreOptions options;
      options.path = partial;
      Expect(SqliteStore::Open(options),
             "SqliteStore::Open");  // Creates and migrates.
    }
    Check(sqlite3_open(partial.c_str(), &db), db, "open");
    const auto start = Clock::now();
    Generator(db, turns, now_us).Run();
    sqlite3_close(db);
    std::filesystem::rename(partial, db_path);
    std::printf("  generated in %.1f s, %.2f GB\n",
                std::chrono::duration<double>(Clock::now() - start).count(),
                std::filesystem::file_size(db_path) / 1e9);
  } else {
    std::printf("  reusing the database built by an earlier run\n");
    StoreOptions options;
    options.path = db_path;
    // Brings it to this build's schema (indexes included) before timing.
    Expect(SqliteStore::Open(options), "SqliteStore::Open");
  }

  // A fresh connection, as the sqlite3 shell or Grafana would use.
  Check(sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr),
        db, "open");
  // The fleet's "now": its last turn (the database may be from an earlier
  // run); windows are bound explicitly relative to it.
  const int64_t end_us =
      std::stoll(FirstText(db, "SELECT max(request_time_us) FROM turns"));
  const std::string day_ago = std::to_string(end_us - 24 * 3600 * kSecondUs);
  const std::string break_id = FirstText(
      db, "SELECT break_id FROM prompt_cache_breaks WHERE request_time_us >= " +
              day_ago + " ORDER BY break_id LIMIT 1");
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(sql_dir)) {
    // SQLite's texts; the .pg.sql variants beside them are PostgreSQL's.
    const std::string name = entry.path().filename().string();
    if (name.ends_with(".sql") && !name.ends_with(".pg.sql")) {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  for (const std::filesystem::path& file : files) {
    RunSqlFile(db, file, "last 24 h",
               {{":break_id", break_id}, {":since_us", day_ago}}, true);
    if (file.filename() != "lane_story.sql") {
      RunSqlFile(db, file, "all 30 days",
                 {{":break_id", break_id}, {":since_us", "0"}}, false);
    }
  }
  RunStoreQueries(db_path, db, end_us);
  sqlite3_close(db);

  std::printf(
      "\n| query | rows | slowest of %d | target | result |\n"
      "|---|---|---|---|---|\n",
      kRepeats);
  bool all_pass = true;
  for (const Result& result : results) {
    const bool pass = result.seconds < kTargetSeconds;
    all_pass = all_pass && pass;
    std::printf("| %s | %lld | %.3f s | < %.0f s | %s |\n", result.name.c_str(),
                static_cast<long long>(result.rows), result.seconds,
                kTargetSeconds, pass ? "PASS" : "FAIL");
  }
  std::printf("queries: %s\n", all_pass ? "PASS" : "FAIL");
  return 0;
}

}  // namespace
}  // namespace cachewatch::bench

int main(int argc, char** argv) { return cachewatch::bench::Main(argc, argv); }
