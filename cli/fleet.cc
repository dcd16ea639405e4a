#include "cli/fleet.h"

#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cachewatch/client/snapshot_builder.h"
#include "cli/format.h"
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

}  // namespace

// One lane: its session's profile, its tools, system prompt and history,
// and what the provider holds in its cache after the previous turn.
class Fleet::Lane {
 public:
  Lane(const FleetOptions& options, int session, int index)
      : options_(options), session_(session), index_(index) {}

  absl::Status NextTurn(int64_t now_us, std::vector<v1::RecordRequest>& records,
                        FleetCounts& counts) {
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
    v1::RecordRequest snapshot_record;
    *snapshot_record.mutable_snapshot() = snapshot;
    records.push_back(std::move(snapshot_record));
    records.push_back(UsageRecord(snapshot, event));
    previous_ = std::move(snapshot);
    ++turn_;
    ++counts.turns;
    counts.records += 2;
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
    rng_ = Rng(Mix(Mix(options_.seed) ^ Mix(sequence * 1000003ULL + session_) ^
                   Mix(index_ + 1ULL)));
    ++counts.lanes_by_provider[profile_->name];

    agent_ = options_.agents[session_ % options_.agents.size()];
    session_id_ = absl::StrFormat("%s-%02d", options_.tag, session_);
    if (generation_ > 0) absl::StrAppend(&session_id_, ".", generation_);
    static constexpr const char* kLaneNames[] = {"main", "explore", "review",
                                                 "plan", "test"};
    lane_ = index_ < 5 ? kLaneNames[index_] : absl::StrCat("sub", index_);
    builder_ = std::make_unique<client::SnapshotBuilder>(
        client::SnapshotBuilderOptions{
            .agent = agent_, .session_id = session_id_, .lane = lane_});
    ++generation_;

    model_index_ = index_ == 0 ? 0 : 1;
    thinking_budget_ = 4096;
    ttl_seconds_ = 0;
    added_tools_ = 0;
    turn_ = 0;
    previous_.reset();
    blocks_.clear();
    MakeTools();
    identity_ = absl::StrCat("You are ", agent_, ", a coding agent. ",
                             Filler(rng_, 200));
    instructions_ = Filler(rng_, rng_.Between(1500, 3500));
    Plan(now_us);
  }

  void MakeTools() {
    tools_.clear();
    for (const char* name : kBuiltinTools) {
      tools_.push_back(NewTool(name));
    }
    for (const McpServer& server : McpServers()) {
      for (const char* tool : server.tools) {
        tools_.push_back(
            NewTool(absl::StrCat("mcp__", server.name, "__", tool)));
      }
    }
    if (registration_order_) ShuffleMcpTools();
  }

  SimTool NewTool(std::string name) {
    const int64_t words = rng_.Between(30, 300);
    SimTool tool{std::move(name), Filler(rng_, words), 0};
    tool.tokens = words + 40;
    return tool;
  }

  // MCP servers connect concurrently: each registers its tools when its
  // handshake completes, so the servers' order varies from one connection
  // to the next.
  void ShuffleMcpTools() {
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
    rng_.Shuffle(servers);
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
      planned.gap_us =
          (planned.event == Event::kIdle ? ttl + rng_.Between(30, 1500)
                                         : rng_.Between(6, 40)) *
          kSecondUs;
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
            NewTool(absl::StrCat("mcp__jira__tool_", ++added_tools_)));
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

  int64_t ToolTokens(const v1::Snapshot& snapshot, int count) const {
    std::map<std::string, int64_t> tokens;
    for (const SimTool& tool : tools_) tokens[tool.name] = tool.tokens;
    int64_t sum = 0;
    for (int i = 0; i < count; ++i) sum += tokens[snapshot.tools(i).name()];
    return sum;
  }

  // Tokens of the longest prefix the provider still holds for `current`.
  int64_t CachedPrefix(const v1::Snapshot& current, Event event,
                       int64_t tools_tokens, int64_t system_tokens) const {
    if (!previous_.has_value() || event == Event::kIdle ||
        event == Event::kEviction) {
      return 0;
    }
    const v1::Snapshot& before = *previous_;
    const bool anthropic = profile_ == &kAnthropic;
    if (before.model() != current.model() ||
        before.options_hash() != current.options_hash() ||
        before.cache_control().ttl_seconds() !=
            current.cache_control().ttl_seconds()) {
      return 0;
    }
    const int tool_count = std::min(before.tools_size(), current.tools_size());
    int first_tool = -1;
    for (int i = 0; i < tool_count && first_tool < 0; ++i) {
      if (before.tools(i).name() != current.tools(i).name() ||
          before.tools(i).schema_hash() != current.tools(i).schema_hash()) {
        first_tool = i;
      }
    }
    if (first_tool < 0 && before.tools_size() != current.tools_size()) {
      first_tool = tool_count;
    }
    // Anthropic caches up to breakpoints only: the first is after the
    // system prompt.
    if (first_tool >= 0) return anthropic ? 0 : ToolTokens(current, first_tool);
    if (before.system_hash() != current.system_hash()) {
      return anthropic ? 0 : tools_tokens;
    }
    const int block_count =
        std::min(before.message_chain_size(), current.message_chain_size());
    int first_block = -1;
    for (int i = 0; i < block_count && first_block < 0; ++i) {
      if (before.message_chain(i) != current.message_chain(i)) first_block = i;
    }
    if (first_block < 0 &&
        current.message_chain_size() < before.message_chain_size()) {
      first_block = block_count;
    }
    if (first_block >= 0) {
      if (anthropic) return tools_tokens + system_tokens;
      int64_t prefix = tools_tokens + system_tokens;
      for (int i = 0; i < first_block; ++i) prefix += blocks_[i].tokens;
      return prefix;
    }
    if (anthropic && event == Event::kFanOut) {
      return tools_tokens + system_tokens;
    }
    return anthropic ? previous_read_ + previous_write_ : previous_total_;
  }

  v1::RecordRequest UsageRecord(const v1::Snapshot& snapshot, Event event) {
    const int64_t tools_tokens = ToolTokens(snapshot, snapshot.tools_size());
    const int64_t system_tokens = static_cast<int64_t>(
        (identity_.size() + instructions_.size() + environment_.size()) / 5);
    int64_t total = tools_tokens + system_tokens;
    for (const Block& block : blocks_) total += block.tokens;
    const int64_t common =
        CachedPrefix(snapshot, event, tools_tokens, system_tokens);
    const int64_t output = rng_.Between(50, 1500);
    v1::RecordRequest record;
    v1::Usage& usage = *record.mutable_usage();
    int64_t read = 0;
    int64_t write = 0;
    if (profile_ == &kAnthropic) {
      const int64_t uncached = rng_.Between(1, 8);
      read = std::min(common, total - uncached);
      write = total - read - uncached;
      usage.set_raw_usage_json(
          AnthropicUsage(uncached, read, write, ttl_seconds_ == 3600, output));
    } else if (profile_ == &kOpenAi) {
      read = common >= 1024 ? std::min(common, total) / 128 * 128 : 0;
      usage.set_raw_usage_json(OpenAiUsage(total, read, output));
    } else {
      read = common >= 1024 ? std::min(common, total) : 0;
      usage.set_raw_usage_json(GeminiUsage(total, read, output));
    }
    previous_read_ = read;
    previous_write_ = write;
    previous_total_ = total;
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

  // What the previous turn sent and what it left in the cache.
  std::optional<v1::Snapshot> previous_;
  int64_t previous_read_ = 0;
  int64_t previous_write_ = 0;
  int64_t previous_total_ = 0;
};

Fleet::Fleet(FleetOptions options) : options_(std::move(options)) {
  for (int session = 0; session < options_.sessions; ++session) {
    for (int lane = 0; lane < options_.lanes_per_session; ++lane) {
      lanes_.push_back(std::make_unique<Lane>(options_, session, lane));
    }
  }
}

Fleet::~Fleet() = default;

absl::Status Fleet::NextStep(int64_t now_us,
                             std::vector<v1::RecordRequest>& records) {
  for (const std::unique_ptr<Lane>& lane : lanes_) {
    if (absl::Status status = lane->NextTurn(now_us, records, counts_);
        !status.ok()) {
      return status;
    }
  }
  return absl::OkStatus();
}

}  // namespace cachewatch::cli
