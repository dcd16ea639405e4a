#include "cli/fleet.h"

#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <random>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cachewatch/client/snapshot_builder.h"
#include "cli/format.h"
#include "daemon/core/classifier.h"
#include "daemon/core/provider_traits.h"
#include "daemon/util/status_macros.h"
#include "nlohmann/json.hpp"

namespace cachewatch::cli {
namespace {

using google::protobuf::util::TimeUtil;

constexpr int64_t kSecondUs = 1'000'000;
// Client timestamps stay this close to now (the daemon accepts 12 h).
constexpr int64_t kMaxAgeUs = 11 * 3600 * kSecondUs;
// Blocks a long tool fan-out appends: past Anthropic's lookback of 20.
constexpr int kFanOutBlocks = 24;

enum class Event {
  kNone,
  kReorder,      // An MCP reconnect registers its tools in another order.
  kIdle,         // The user steps away for longer than the TTL.
  kRewrite,      // A tool result in the history is truncated.
  kCompaction,   // The history is summarized (hinted).
  kSchemaEdit,   // A tool description is edited.
  kToolAdded,    // An MCP server adds a tool.
  kToolRemoved,  // An MCP server drops a tool.
  kModelSwitch,
  kOptions,   // The thinking budget changes.
  kFanOut,    // A long parallel tool fan-out.
  kTtlFlip,   // The agent switches between the 5 min and 1 h TTL.
  kEviction,  // Nothing changed; the provider evicted early.
};

struct EventRate {
  Event event;
  double per_turn;
};

constexpr EventRate kEventRates[] = {
    {Event::kReorder, 0.10},      {Event::kIdle, 0.04},
    {Event::kCompaction, 0.03},   {Event::kRewrite, 0.025},
    {Event::kSchemaEdit, 0.02},   {Event::kToolAdded, 0.015},
    {Event::kToolRemoved, 0.015}, {Event::kModelSwitch, 0.015},
    {Event::kOptions, 0.015},     {Event::kFanOut, 0.015},
    {Event::kTtlFlip, 0.01},      {Event::kEviction, 0.01},
};

std::string CauseName(Event event) {
  switch (event) {
    case Event::kReorder:
      return "tools_order_changed";
    case Event::kIdle:
      return "ttl_expired";
    case Event::kRewrite:
      return "messages_changed";
    case Event::kCompaction:
      return "compaction (expected drop)";
    case Event::kSchemaEdit:
      return "tools_schema_changed";
    case Event::kToolAdded:
      return "tools_added";
    case Event::kToolRemoved:
      return "tools_removed";
    case Event::kModelSwitch:
      return "model_changed";
    case Event::kOptions:
      return "request_options_changed";
    case Event::kFanOut:
      return "breakpoint_lookback_exceeded";
    case Event::kTtlFlip:
      return "cache_control_changed";
    case Event::kEviction:
      return "likely_provider_eviction";
    case Event::kNone:
      break;
  }
  return "none";
}

struct ProviderProfile {
  v1::Provider provider;
  const char* name;
  const char* models[2];
};

constexpr ProviderProfile kAnthropic = {
    v1::PROVIDER_ANTHROPIC,
    "anthropic",
    {"claude-sonnet-4-5", "claude-opus-4-1"}};
constexpr ProviderProfile kOpenAi = {
    v1::PROVIDER_OPENAI, "openai", {"gpt-4.1", "gpt-4.1-mini"}};
constexpr ProviderProfile kGemini = {
    v1::PROVIDER_GEMINI, "gemini", {"gemini-2.5-pro", "gemini-2.5-flash"}};

constexpr const char* kBuiltinTools[] = {
    "Bash",      "Read", "Write",       "Edit",     "MultiEdit",
    "Glob",      "Grep", "LS",          "WebFetch", "WebSearch",
    "TodoWrite", "Task", "NotebookEdit"};

struct McpServer {
  const char* name;
  std::vector<const char*> tools;
};

const std::vector<McpServer>& McpServers() {
  static const auto* const kServers = new std::vector<McpServer>{
      {"github",
       {"create_issue", "get_issue", "list_issues", "update_issue",
        "add_issue_comment", "search_code", "search_issues",
        "get_file_contents", "create_pull_request", "get_pull_request",
        "list_pull_requests", "merge_pull_request", "create_branch",
        "list_commits"}},
      {"linear",
       {"create_issue", "get_issue", "list_issues", "update_issue",
        "list_projects", "list_teams", "create_comment", "search"}},
      {"slack",
       {"post_message", "list_channels", "get_channel_history",
        "reply_to_thread", "add_reaction", "get_users"}},
      {"postgres", {"query", "list_schemas", "list_tables", "describe_table"}},
      {"playwright",
       {"navigate", "click", "type", "screenshot", "snapshot", "evaluate",
        "wait_for"}},
  };
  return *kServers;
}

// SplitMix64: independent, reproducible seeds for every session and lane.
uint64_t Mix(uint64_t value) {
  value += 0x9e3779b97f4a7c15ULL;
  value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ULL;
  value = (value ^ (value >> 27)) * 0x94d049bb133111ebULL;
  return value ^ (value >> 31);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  // Uniform in [low, high].
  int64_t Between(int64_t low, int64_t high) {
    return low + static_cast<int64_t>(engine_() %
                                      static_cast<uint64_t>(high - low + 1));
  }
  double Unit() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  bool Chance(double probability) { return Unit() < probability; }
  template <typename T>
  void Shuffle(std::vector<T>& items) {
    for (size_t i = items.size(); i > 1; --i) {
      std::swap(items[i - 1], items[Between(0, static_cast<int64_t>(i) - 1)]);
    }
  }

 private:
  std::mt19937_64 engine_;
};

struct SimTool {
  std::string name;
  std::string description;
  int64_t tokens = 0;

  std::string Definition() const {
    return nlohmann::json{{"name", name},
                          {"description", description},
                          {"input_schema",
                           {{"type", "object"},
                            {"properties", {{"query", {{"type", "string"}}}}},
                            {"required", {"query"}}}}}
        .dump();
  }
};

struct Block {
  std::string json;
  int64_t tokens = 0;
};

struct PlannedTurn {
  Event event = Event::kNone;
  int64_t gap_us = 0;  // Since the previous turn's request.
};

std::string Filler(Rng& rng, int64_t words) {
  static constexpr const char* kWords[] = {
      "the",  "file",     "returns", "search", "results",
      "for",  "a",        "given",   "path",   "query",
      "with", "optional", "limit",   "and",    "offset"};
  std::string text;
  for (int64_t i = 0; i < words; ++i) {
    absl::StrAppend(&text, i ? " " : "", kWords[rng.Between(0, 14)]);
  }
  return text;
}

std::string AnthropicUsage(int64_t uncached, int64_t read, int64_t write,
                           bool one_hour, int64_t output) {
  return nlohmann::json{{"input_tokens", uncached},
                        {"cache_read_input_tokens", read},
                        {"cache_creation_input_tokens", write},
                        {"cache_creation",
                         {{"ephemeral_5m_input_tokens", one_hour ? 0 : write},
                          {"ephemeral_1h_input_tokens", one_hour ? write : 0}}},
                        {"output_tokens", output}}
      .dump();
}

std::string OpenAiUsage(int64_t prompt, int64_t cached, int64_t output) {
  return nlohmann::json{{"prompt_tokens", prompt},
                        {"completion_tokens", output},
                        {"total_tokens", prompt + output},
                        {"prompt_tokens_details", {{"cached_tokens", cached}}}}
      .dump();
}

std::string GeminiUsage(int64_t prompt, int64_t cached, int64_t output) {
  return nlohmann::json{{"usageMetadata",
                         {{"promptTokenCount", prompt},
                          {"cachedContentTokenCount", cached},
                          {"candidatesTokenCount", output},
                          {"totalTokenCount", prompt + output}}}}
      .dump();
}

// A prompt as the provider cache sees it: for each block (every tool, the
// system prompt, every message block) the hash of the whole prefix up to and
// including it, and the prefix's tokens; and the blocks that carry a
// breakpoint.
struct Prompt {
  std::vector<uint64_t> keys;
  std::vector<int64_t> tokens;
  std::vector<int> breakpoints;  // Ascending; explicit caching only.
};

// What happened to the lane's previous prefix (the block of its last
// breakpoint), seen just before a request.
enum class PrefixState {
  kNone,
  kHit,
  kExpired,
  kEvicted,
  kBeyondLookback,
  kChanged
};

const char* PrefixStateName(PrefixState state) {
  switch (state) {
    case PrefixState::kNone:
      return "none";
    case PrefixState::kHit:
      return "hit";
    case PrefixState::kExpired:
      return "expired";
    case PrefixState::kEvicted:
      return "evicted";
    case PrefixState::kBeyondLookback:
      return "beyond_lookback";
    case PrefixState::kChanged:
      return "changed";
  }
  return "none";
}

// One session's provider-side cache, which every lane of the session reads
// and writes (subagents share their session's cached tools and system).
class ProviderCache {
 public:
  // Anthropic: a breakpoint looks for an entry at its block and up to 19
  // blocks before it.
  static constexpr int kLookbackBlocks = 20;

  void EvictAll() {
    for (auto& [key, entry] : entries_) entry.evicted = true;
  }

  // The state of the entry `key` (a prefix a previous request cached) for a
  // request `prompt` at `now_us`.
  PrefixState StateOf(uint64_t key, const Prompt& prompt, bool explicit_cache,
                      int64_t now_us) const {
    const auto position =
        std::find(prompt.keys.begin(), prompt.keys.end(), key);
    if (position == prompt.keys.end()) return PrefixState::kChanged;
    const auto it = entries_.find(key);
    if (it == entries_.end()) return PrefixState::kChanged;
    // An entry that would have expired anyway was lost to its TTL.
    if (now_us >= it->second.expires_us) return PrefixState::kExpired;
    if (it->second.evicted) return PrefixState::kEvicted;
    if (explicit_cache) {
      const int block = static_cast<int>(position - prompt.keys.begin());
      for (int breakpoint : prompt.breakpoints) {
        if (breakpoint >= block && breakpoint - block < kLookbackBlocks) {
          return PrefixState::kHit;
        }
      }
      return PrefixState::kBeyondLookback;
    }
    return PrefixState::kHit;
  }

  // Serves `prompt` at `now_us`: returns the tokens read (the longest live
  // prefix found), refreshes the TTL of what it read and writes the
  // prompt's prefixes (at its breakpoints, or every prefix when caching is
  // automatic) for `ttl_us`.
  int64_t Serve(const Prompt& prompt, bool explicit_cache, int64_t ttl_us,
                int64_t now_us) {
    int64_t read = 0;
    const auto live = [&](int block) {
      const auto it = entries_.find(prompt.keys[block]);
      return it != entries_.end() && !it->second.evicted &&
                     now_us < it->second.expires_us
                 ? &it->second
                 : nullptr;
    };
    const auto take = [&](int block, Entry* entry) {
      entry->expires_us = now_us + ttl_us;
      read = std::max(read, prompt.tokens[block]);
    };
    if (explicit_cache) {
      for (int breakpoint : prompt.breakpoints) {
        for (int block = breakpoint;
             block >= 0 && breakpoint - block < kLookbackBlocks; --block) {
          if (Entry* entry = live(block)) {
            take(block, entry);
            break;
          }
        }
      }
      for (int breakpoint : prompt.breakpoints)
        Write(prompt, breakpoint, ttl_us, now_us);
    } else {
      for (int block = static_cast<int>(prompt.keys.size()) - 1; block >= 0;
           --block) {
        if (Entry* entry = live(block)) {
          take(block, entry);
          break;
        }
      }
      for (size_t block = 0; block < prompt.keys.size(); ++block) {
        Write(prompt, static_cast<int>(block), ttl_us, now_us);
      }
    }
    return read;
  }

 private:
  struct Entry {
    int64_t expires_us = 0;
    bool evicted = false;
  };

  void Write(const Prompt& prompt, int block, int64_t ttl_us, int64_t now_us) {
    Entry& entry = entries_[prompt.keys[block]];
    entry.expires_us = std::max(entry.expires_us, now_us + ttl_us);
    if (entry.evicted) {
      entry = Entry{now_us + ttl_us, false};
    }
  }

  std::unordered_map<uint64_t, Entry> entries_;
};

uint64_t Combine(uint64_t seed, uint64_t value) {
  return Mix(seed ^ Mix(value));
}

// Prefix order of the structural causes: the one earliest in the prompt is
// the primary reason of a break that has several.
int PrefixRank(Event event) {
  switch (event) {
    case Event::kModelSwitch:
      return 0;
    case Event::kTtlFlip:
      return 1;
    case Event::kOptions:
      return 2;
    case Event::kReorder:
    case Event::kSchemaEdit:
    case Event::kToolAdded:
    case Event::kToolRemoved:
      return 3;
    case Event::kRewrite:
      return 5;
    default:
      return 9;
  }
}

}  // namespace

// The provider caches of the fleet's sessions, by session id.
class Fleet::ProviderCaches {
 public:
  ProviderCache& For(const std::string& session_id) {
    return caches_[session_id];
  }
  void Forget(const std::string& session_id) { caches_.erase(session_id); }

 private:
  std::map<std::string, ProviderCache> caches_;
};

// One lane: its session's profile, its tools, system prompt and history,
// and what the provider holds in its cache after the previous turn.
class Fleet::Lane {
 public:
  Lane(const FleetOptions& options, ProviderCaches& caches, int session,
       int index)
      : options_(options), caches_(caches), session_(session), index_(index) {}

  absl::Status NextTurn(int64_t now_us, std::vector<v1::RecordRequest>& records,
                        std::vector<TurnTruth>* truths, FleetCounts& counts) {
    if (plan_.empty() || turn_ == static_cast<int>(plan_.size())) {
      StartSession(now_us, counts);
    }
    const PlannedTurn& planned = plan_[turn_];
    const int64_t latest = now_us - 10 * kSecondUs;
    request_us_ =
        turn_ == 0 ? std::min(start_us_, latest)
                   : std::max(request_us_ + 1000,
                              std::min(request_us_ + planned.gap_us, latest));
    const Event event = Apply(planned.event);
    if (event != Event::kNone) ++counts.causes[CauseName(event)];
    if (timestamp_in_system_ && turn_ > 0) {
      ++counts.causes["system_changed (timestamp in prompt)"];
    }
    AppendBlocks(event == Event::kFanOut ? kFanOutBlocks : 2);

    CACHEWATCH_ASSIGN_OR_RETURN(v1::Snapshot snapshot, Build());
    TurnTruth truth;
    const v1::RecordRequest usage = UsageRecord(snapshot, event, truth);
    truth.snapshot_lost = turn_ > 0 && rng_.Chance(options_.lost_snapshot_rate);
    if (!truth.snapshot_lost) {
      v1::RecordRequest snapshot_record;
      *snapshot_record.mutable_snapshot() = snapshot;
      records.push_back(std::move(snapshot_record));
      ++counts.records;
    }
    records.push_back(usage);
    ++counts.records;
    if (rng_.Chance(options_.duplicate_usage_rate)) {
      records.push_back(usage);
      ++counts.records;
    }
    if (truths != nullptr) truths->push_back(std::move(truth));
    ++turn_;
    ++counts.turns;
    return absl::OkStatus();
  }

 private:
  // A new session: a fresh profile, tools, prompt, history and plan.
  void StartSession(int64_t now_us, FleetCounts& counts) {
    // Every profile turns up among a handful of sessions, whatever the
    // seed: providers 2:2:1 (Anthropic, OpenAI, Gemini), MCP tools in
    // registration order in two sessions of five, a timestamp in the system
    // prompt in one.
    static constexpr const ProviderProfile* kProviderCycle[] = {
        &kAnthropic, &kOpenAi, &kAnthropic, &kGemini, &kOpenAi};
    const uint64_t sequence = session_ + generation_;
    profile_ = kProviderCycle[(sequence + options_.seed) % 5];
    const uint64_t trait = (sequence * 3 + options_.seed * 7) % 5;
    registration_order_ = trait < 2;
    timestamp_in_system_ = trait == 4;
    // The session's tools and system prompt, which all its lanes share,
    // come from the session's generator; the rest from the lane's.
    Rng session_rng(
        Mix(Mix(options_.seed) ^ Mix(sequence * 1000003ULL + session_)));
    rng_ = Rng(Mix(Mix(options_.seed) ^ Mix(sequence * 1000003ULL + session_) ^
                   Mix(index_ + 1ULL)));
    ++counts.lanes_by_provider[profile_->name];

    agent_ = options_.agents[session_ % options_.agents.size()];
    if (index_ == 0 && !session_id_.empty()) caches_.Forget(session_id_);
    session_id_ = absl::StrFormat("%s-%02d", options_.tag, session_);
    if (generation_ > 0) absl::StrAppend(&session_id_, ".", generation_);
    static constexpr const char* kLaneNames[] = {"main", "explore", "review",
                                                 "plan", "test"};
    lane_ = index_ < 5 ? kLaneNames[index_] : absl::StrCat("sub", index_);
    builder_ = std::make_unique<client::SnapshotBuilder>(
        client::SnapshotBuilderOptions{
            .agent = agent_, .session_id = session_id_, .lane = lane_});
    ++generation_;

    model_index_ = 0;
    thinking_budget_ = 4096;
    ttl_seconds_ = 0;
    added_tools_ = 0;
    turn_ = 0;
    previous_key_.reset();
    previous_cached_ = 0;
    blocks_.clear();
    MakeTools(session_rng);
    identity_ = absl::StrCat("You are ", agent_, ", a coding agent. ",
                             Filler(session_rng, 200));
    instructions_ = Filler(session_rng, session_rng.Between(1500, 3500));
    Plan(now_us);
  }

  void MakeTools(Rng& rng) {
    tools_.clear();
    for (const char* name : kBuiltinTools) {
      tools_.push_back(NewTool(name, rng));
    }
    for (const McpServer& server : McpServers()) {
      for (const char* tool : server.tools) {
        tools_.push_back(
            NewTool(absl::StrCat("mcp__", server.name, "__", tool), rng));
      }
    }
    if (registration_order_) ShuffleMcpTools(rng);
  }

  static SimTool NewTool(std::string name, Rng& rng) {
    const int64_t words = rng.Between(30, 300);
    SimTool tool{std::move(name), Filler(rng, words), 0};
    tool.tokens = words + 40;
    return tool;
  }

  // MCP servers connect concurrently: each registers its tools when its
  // handshake completes, so the servers' order varies from one connection
  // to the next.
  void ShuffleMcpTools() { ShuffleMcpTools(rng_); }
  void ShuffleMcpTools(Rng& rng) {
    std::vector<std::vector<SimTool>> servers;
    std::vector<SimTool> builtins;
    std::map<std::string, size_t> server_index;
    for (SimTool& tool : tools_) {
      if (!tool.name.starts_with("mcp__")) {
        builtins.push_back(std::move(tool));
        continue;
      }
      const std::string server = tool.name.substr(0, tool.name.find("__", 5));
      auto [it, added] = server_index.emplace(server, servers.size());
      if (added) servers.emplace_back();
      servers[it->second].push_back(std::move(tool));
    }
    rng.Shuffle(servers);
    tools_ = std::move(builtins);
    for (std::vector<SimTool>& server : servers) {
      tools_.insert(tools_.end(), server.begin(), server.end());
    }
  }

  void Plan(int64_t now_us) {
    plan_.assign(options_.turns, PlannedTurn{});
    uint32_t ttl = 300;
    int last_compaction = 0;
    int64_t span_us = 10 * kSecondUs;
    for (int turn = 1; turn < options_.turns; ++turn) {
      PlannedTurn& planned = plan_[turn];
      double draw = rng_.Unit();
      for (const EventRate& rate : kEventRates) {
        if (draw < rate.per_turn) {
          planned.event = rate.event;
          break;
        }
        draw -= rate.per_turn;
      }
      const bool anthropic = profile_ == &kAnthropic;
      if ((planned.event == Event::kReorder && !registration_order_) ||
          ((planned.event == Event::kFanOut ||
            planned.event == Event::kTtlFlip) &&
           !anthropic) ||
          (planned.event == Event::kCompaction &&
           turn - last_compaction < 15)) {
        planned.event = Event::kNone;
      }
      if (planned.event == Event::kCompaction) last_compaction = turn;
      if (planned.event == Event::kTtlFlip) ttl = ttl == 300 ? 3600 : 300;
      int64_t gap_seconds = rng_.Between(6, 40);
      if (planned.event == Event::kIdle) {
        gap_seconds = rng_.Chance(options_.long_idle_rate)
                          ? rng_.Between(2 * 3600, 5 * 3600)
                          : ttl + rng_.Between(30, 1500);
      }
      planned.gap_us = gap_seconds * kSecondUs;
      span_us += planned.gap_us;
    }
    start_us_ = now_us - std::min(span_us, kMaxAgeUs);
  }

  // Makes the planned change; returns the event that actually happened.
  Event Apply(Event event) {
    expected_drop_ = v1::EXPECTED_DROP_UNSPECIFIED;
    switch (event) {
      case Event::kReorder: {
        const std::vector<SimTool> before = tools_;
        ShuffleMcpTools();
        return std::equal(before.begin(), before.end(), tools_.begin(),
                          [](const SimTool& a, const SimTool& b) {
                            return a.name == b.name;
                          })
                   ? Event::kNone
                   : event;
      }
      case Event::kSchemaEdit: {
        SimTool& tool = tools_[rng_.Between(0, tools_.size() - 1)];
        absl::StrAppend(&tool.description, " Supports pagination.");
        tool.tokens += 4;
        return event;
      }
      case Event::kToolAdded:
        tools_.push_back(
            NewTool(absl::StrCat("mcp__jira__tool_", ++added_tools_), rng_));
        return event;
      case Event::kToolRemoved: {
        const int64_t builtins = std::size(kBuiltinTools);
        tools_.erase(tools_.begin() +
                     rng_.Between(builtins, tools_.size() - 1));
        return event;
      }
      case Event::kModelSwitch:
        model_index_ ^= 1;
        return event;
      case Event::kOptions:
        thinking_budget_ = thinking_budget_ == 4096 ? 16384 : 4096;
        return event;
      case Event::kTtlFlip:
        ttl_seconds_ = ttl_seconds_ == 0 ? 3600 : 0;
        return event;
      case Event::kRewrite: {
        if (blocks_.size() < 6) return Event::kNone;
        Block& block = blocks_[rng_.Between(1, blocks_.size() - 4)];
        block.json = nlohmann::json{{"role", "user"},
                                    {"type", "tool_result"},
                                    {"content", "[output truncated]"}}
                         .dump();
        block.tokens = 8;
        return event;
      }
      case Event::kCompaction:
        blocks_ = {{nlohmann::json{
                        {"role", "user"},
                        {"type", "text"},
                        {"text", absl::StrCat("Summary of turns 0-", turn_)}}
                        .dump(),
                    rng_.Between(1500, 4000)}};
        expected_drop_ = v1::EXPECTED_DROP_COMPACTION;
        return event;
      case Event::kIdle:
      case Event::kFanOut:
      case Event::kEviction:
      case Event::kNone:
        return event;
    }
    return event;
  }

  void AppendBlocks(int pairs_or_blocks) {
    if (turn_ == 0) {
      blocks_.push_back(
          {nlohmann::json{
               {"role", "user"}, {"type", "text"}, {"text", Filler(rng_, 40)}}
               .dump(),
           rng_.Between(40, 400)});
      return;
    }
    for (int i = 0; i < pairs_or_blocks; ++i) {
      const bool call = i % 2 == 0;
      nlohmann::json block = {{"role", call ? "assistant" : "user"},
                              {"type", call ? "tool_use" : "tool_result"},
                              {"id", absl::StrCat("t", turn_, "_", i)}};
      block[call ? "input" : "content"] = Filler(rng_, 12);
      blocks_.push_back({block.dump(), call ? rng_.Between(40, 300)
                                            : rng_.Between(100, 1800)});
    }
  }

  absl::StatusOr<v1::Snapshot> Build() {
    std::vector<client::Tool> tools;
    for (const SimTool& tool : tools_) {
      tools.push_back({.name = tool.name, .definition = tool.Definition()});
    }
    std::vector<std::string> blocks;
    for (const Block& block : blocks_) blocks.push_back(block.json);
    environment_ = absl::StrCat(
        "Platform: linux. Today's date: ",
        timestamp_in_system_
            ? FormatTime(TimeUtil::MicrosecondsToTimestamp(request_us_))
            : FormatTime(TimeUtil::MicrosecondsToTimestamp(start_us_))
                  .substr(0, 10));
    const client::SystemSectionText sections[] = {
        {"identity", identity_},
        {"instructions", instructions_},
        {"environment", environment_}};
    const std::string system =
        absl::StrCat(identity_, "\n\n", instructions_, "\n\n", environment_);
    const std::string options_json =
        absl::StrFormat(R"({"thinking":{"type":"enabled","budget_tokens":%d}})",
                        thinking_budget_);
    v1::CacheControl cache_control;
    cache_control.set_enabled(true);
    if (profile_ == &kAnthropic) {
      cache_control.set_ttl_seconds(ttl_seconds_);
      // As Claude Code does: on the last tool, the system prompt and the
      // last message block.
      v1::Breakpoint* tools_breakpoint = cache_control.add_breakpoints();
      tools_breakpoint->set_segment(v1::PROMPT_SEGMENT_TOOLS);
      tools_breakpoint->set_index(tools.size() - 1);
      v1::Breakpoint* system_breakpoint = cache_control.add_breakpoints();
      system_breakpoint->set_segment(v1::PROMPT_SEGMENT_SYSTEM);
      system_breakpoint->set_index(std::size(sections) - 1);
      v1::Breakpoint* message_breakpoint = cache_control.add_breakpoints();
      message_breakpoint->set_segment(v1::PROMPT_SEGMENT_MESSAGES);
      message_breakpoint->set_index(blocks_.size() - 1);
    } else {
      cache_control.set_automatic(true);
    }
    const std::string request_id = absl::StrFormat("req-%04d", turn_);
    absl::StatusOr<v1::Snapshot> snapshot = builder_->Build({
        .request_id = request_id,
        .time = std::chrono::system_clock::time_point(
            std::chrono::microseconds(request_us_)),
        .provider = profile_->provider,
        .model = profile_->models[model_index_],
        .system_prompt = system,
        .system_sections = sections,
        .tools = tools,
        .message_blocks = blocks,
        .options_json = options_json,
        .cache_control = cache_control,
        .expected_drop = expected_drop_,
    });
    if (!snapshot.ok() || !registration_order_) return snapshot;
    // The builder sorts the tools; this agent sends them as registered.
    std::map<std::string, uint64_t> hashes;
    for (const v1::ToolRef& tool : snapshot->tools()) {
      hashes[tool.name()] = tool.schema_hash();
    }
    snapshot->clear_tools();
    for (const SimTool& tool : tools_) {
      v1::ToolRef* ref = snapshot->add_tools();
      ref->set_name(tool.name);
      ref->set_schema_hash(hashes[tool.name]);
    }
    snapshot->set_tool_order_policy(v1::TOOL_ORDER_POLICY_REGISTRATION);
    return snapshot;
  }

  // The prompt as the provider cache keys it: the model, the request
  // options and (Anthropic) the TTL asked for key every entry.
  Prompt PromptOf(const v1::Snapshot& snapshot) const {
    std::map<std::string, int64_t> tool_tokens;
    for (const SimTool& tool : tools_) tool_tokens[tool.name] = tool.tokens;
    Prompt prompt;
    uint64_t key = Combine(Combine(std::hash<std::string>()(snapshot.model()),
                                   snapshot.options_hash()),
                           snapshot.cache_control().ttl_seconds());
    int64_t tokens = 0;
    const auto add = [&](uint64_t block_hash, int64_t block_tokens) {
      key = Combine(key, block_hash);
      tokens += block_tokens;
      prompt.keys.push_back(key);
      prompt.tokens.push_back(tokens);
    };
    for (const v1::ToolRef& tool : snapshot.tools()) {
      add(Combine(std::hash<std::string>()(tool.name()), tool.schema_hash()),
          tool_tokens[tool.name()]);
    }
    const int tools_end = static_cast<int>(prompt.keys.size()) - 1;
    add(snapshot.system_hash(),
        static_cast<int64_t>(
            (identity_.size() + instructions_.size() + environment_.size()) /
            5));
    const int system_end = static_cast<int>(prompt.keys.size()) - 1;
    for (int i = 0; i < snapshot.message_chain_size(); ++i) {
      add(snapshot.message_chain(i), blocks_[i].tokens);
    }
    if (profile_ == &kAnthropic) {
      if (tools_end >= 0) prompt.breakpoints.push_back(tools_end);
      prompt.breakpoints.push_back(system_end);
      prompt.breakpoints.push_back(static_cast<int>(prompt.keys.size()) - 1);
    }
    return prompt;
  }

  // The structural cause of this turn, as the design names it, or "" when
  // nothing in the prompt was changed on purpose.
  std::string StructuralCause(Event event) const {
    const bool system_changed = timestamp_in_system_ && turn_ > 0;
    if (PrefixRank(event) < 4) return CauseName(event);
    if (system_changed) return "system_changed";
    if (PrefixRank(event) < 9) return CauseName(event);
    return "";
  }

  // Serves the request from the session's provider cache and fills `truth`.
  v1::RecordRequest UsageRecord(const v1::Snapshot& snapshot, Event event,
                                TurnTruth& truth) {
    ProviderCache& cache = caches_.For(session_id_);
    const Prompt prompt = PromptOf(snapshot);
    const bool anthropic = profile_ == &kAnthropic;
    const int64_t ttl_us =
        (anthropic && ttl_seconds_ == 3600 ? 3600 : 300) * kSecondUs;
    if (event == Event::kEviction) cache.EvictAll();
    const PrefixState state =
        previous_key_.has_value()
            ? cache.StateOf(*previous_key_, prompt, anthropic, request_us_)
            : PrefixState::kNone;
    const int64_t cached = cache.Serve(prompt, anthropic, ttl_us, request_us_);
    const int64_t uncached_tail = anthropic ? rng_.Between(1, 8) : 0;
    const int64_t total = prompt.tokens.back() + uncached_tail;
    const int64_t output = rng_.Between(50, 1500);
    v1::RecordRequest record;
    v1::Usage& usage = *record.mutable_usage();
    int64_t read = 0;
    int64_t write = 0;
    if (anthropic) {
      read = cached;
      write = total - read - uncached_tail;
      usage.set_raw_usage_json(AnthropicUsage(uncached_tail, read, write,
                                              ttl_seconds_ == 3600, output));
    } else if (profile_ == &kOpenAi) {
      read = cached >= 1024 ? cached / 128 * 128 : 0;
      usage.set_raw_usage_json(OpenAiUsage(total, read, output));
    } else {
      read = cached >= 1024 ? cached : 0;
      usage.set_raw_usage_json(GeminiUsage(total, read, output));
    }

    truth.agent = agent_;
    truth.session_id = session_id_;
    truth.lane = lane_;
    truth.request_id = snapshot.request_id();
    truth.cache = PrefixStateName(state);
    truth.cache_read_tokens = read;
    const ProviderTraits traits =
        TraitsFor(profile_->provider, snapshot.model());
    const int64_t expected = std::min(previous_cached_, total);
    truth.expected_reuse_tokens = expected;
    const int64_t missed = std::max<int64_t>(0, expected - read);
    const ClassifierOptions thresholds;
    if (turn_ == 0) {
      truth.truth = "cold_start";
    } else if (expected_drop_ != v1::EXPECTED_DROP_UNSPECIFIED) {
      truth.truth = "expected_drop";
    } else if (total < traits.min_cacheable_tokens) {
      truth.truth = "below_min_cacheable";
    } else if (missed < std::max(thresholds.min_missed_tokens,
                                 traits.noise_floor_tokens) ||
               static_cast<double>(missed) < static_cast<double>(expected) *
                                                 thresholds.min_missed_ratio) {
      truth.truth = "ok";
    } else if (std::string cause = StructuralCause(event); !cause.empty()) {
      truth.truth = std::move(cause);
    } else if (state == PrefixState::kExpired) {
      truth.truth = "ttl_expired";
    } else if (state == PrefixState::kEvicted) {
      truth.truth = "likely_provider_eviction";
    } else if (state == PrefixState::kBeyondLookback) {
      truth.truth = "breakpoint_lookback_exceeded";
    } else {
      truth.truth = "unexplained";
    }

    previous_key_ =
        anthropic ? prompt.keys[prompt.breakpoints.back()] : prompt.keys.back();
    previous_cached_ = anthropic ? read + write : total;
    usage.set_agent(agent_);
    usage.set_session_id(session_id_);
    usage.set_lane(lane_);
    usage.set_request_id(snapshot.request_id());
    *usage.mutable_response_time() = TimeUtil::MicrosecondsToTimestamp(
        request_us_ + rng_.Between(1500, 9000) * 1000);
    usage.set_provider(profile_->provider);
    usage.set_model(snapshot.model());
    return record;
  }

  const FleetOptions& options_;
  ProviderCaches& caches_;
  const int session_;
  const int index_;
  int generation_ = 0;
  Rng rng_{0};

  // The session.
  const ProviderProfile* profile_ = nullptr;
  bool registration_order_ = false;
  bool timestamp_in_system_ = false;
  std::string agent_;
  std::string session_id_;
  std::string lane_;
  std::unique_ptr<client::SnapshotBuilder> builder_;
  std::vector<PlannedTurn> plan_;
  int64_t start_us_ = 0;

  // The agent's state.
  int turn_ = 0;
  int64_t request_us_ = 0;
  int model_index_ = 0;
  int thinking_budget_ = 4096;
  uint32_t ttl_seconds_ = 0;
  int added_tools_ = 0;
  std::vector<SimTool> tools_;  // In registration order.
  std::string identity_;
  std::string instructions_;
  std::string environment_;
  std::vector<Block> blocks_;
  v1::ExpectedDrop expected_drop_ = v1::EXPECTED_DROP_UNSPECIFIED;

  // The lane's previous prefix (the block of its last breakpoint, or its
  // whole prompt) and what it left in the cache (read + write where writes
  // are reported, else the whole prompt).
  std::optional<uint64_t> previous_key_;
  int64_t previous_cached_ = 0;
};

Fleet::Fleet(FleetOptions options)
    : options_(std::move(options)),
      caches_(std::make_unique<ProviderCaches>()) {
  for (int session = 0; session < options_.sessions; ++session) {
    for (int lane = 0; lane < options_.lanes_per_session; ++lane) {
      lanes_.push_back(
          std::make_unique<Lane>(options_, *caches_, session, lane));
    }
  }
}

Fleet::~Fleet() = default;

absl::Status Fleet::NextStep(int64_t now_us,
                             std::vector<v1::RecordRequest>& records,
                             std::vector<TurnTruth>* truths) {
  for (const std::unique_ptr<Lane>& lane : lanes_) {
    CACHEWATCH_RETURN_IF_ERROR(
        lane->NextTurn(now_us, records, truths, counts_));
  }
  return absl::OkStatus();
}

}  // namespace cachewatch::cli
