#include "cachewatch/client/snapshot_builder.h"

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "cachewatch/client/hash.h"
#include "gtest/gtest.h"

namespace cachewatch::client {
namespace {

using std::chrono::system_clock;

const system_clock::time_point kTime =
    system_clock::time_point(std::chrono::nanoseconds(1764489600123456789));

Tool MakeTool(std::string name, std::string description = "A tool.") {
  Tool tool;
  tool.definition = R"({"name":")" + name + R"(","description":")" +
                    description +
                    R"(","input_schema":{"type":"object","properties":{}}})";
  tool.name = std::move(name);
  return tool;
}

std::vector<Tool> McpTools() {
  return {MakeTool("read_file"), MakeTool("shell"),
          MakeTool("mcp__github__search_issues"),
          MakeTool("mcp__filesystem__read_tree")};
}

SnapshotBuilderOptions Options() {
  return {.agent = "test-agent", .session_id = "session-1"};
}

// A request with the required fields set.
ModelRequest Request(absl::Span<const Tool> tools = {},
                     absl::Span<const std::string> blocks = {}) {
  return {.request_id = "req-1",
          .time = kTime,
          .provider = v1::PROVIDER_ANTHROPIC,
          .model = "claude-sonnet-4-5",
          .system_prompt = "You are a coding agent.",
          .tools = tools,
          .message_blocks = blocks};
}

std::vector<std::string> ToolNames(const v1::Snapshot& snapshot) {
  std::vector<std::string> names;
  for (const v1::ToolRef& tool : snapshot.tools()) names.push_back(tool.name());
  return names;
}

void ExpectInvalid(const absl::Status& status, std::string_view fragment) {
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(status.message()).find(fragment),
            std::string_view::npos)
      << status;
}

TEST(SnapshotBuilderTest, FillsEveryField) {
  const std::vector<Tool> tools = {
      MakeTool("shell"),
      {.name = "hidden", .definition = "{}", .should_defer = true},
      MakeTool("read_file"),
  };
  const std::vector<std::string> blocks = {
      R"({"role":"user","type":"text","text":"hi"})",
      R"({"role":"assistant","type":"text","text":"hello"})"};
  const SystemSectionText sections[] = {{"persona", "You are a coding agent."},
                                        {"date", "Today is 2026-11-30."}};
  v1::CacheControl cache_control;
  cache_control.set_enabled(true);
  cache_control.set_ttl_seconds(3600);

  SnapshotBuilder builder(
      {.agent = "my-agent", .session_id = "s-42", .lane = "subagent-1"});
  ModelRequest request = Request(tools, blocks);
  request.system_sections = sections;
  request.options_json = R"({"thinking":{"budget_tokens":8000}})";
  request.cache_control = cache_control;
  request.expected_drop = v1::EXPECTED_DROP_COMPACTION;
  const absl::StatusOr<v1::Snapshot> snapshot = builder.Build(request);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();

  EXPECT_EQ(snapshot->agent(), "my-agent");
  EXPECT_EQ(snapshot->session_id(), "s-42");
  EXPECT_EQ(snapshot->lane(), "subagent-1");
  EXPECT_EQ(snapshot->request_id(), "req-1");
  EXPECT_EQ(snapshot->request_time().seconds(), 1764489600);
  EXPECT_EQ(snapshot->request_time().nanos(), 123456789);
  EXPECT_EQ(snapshot->provider(), v1::PROVIDER_ANTHROPIC);
  EXPECT_EQ(snapshot->model(), "claude-sonnet-4-5");
  EXPECT_EQ(snapshot->system_hash(), HashBytes("You are a coding agent."));
  ASSERT_EQ(snapshot->system_sections_size(), 2);
  EXPECT_EQ(snapshot->system_sections(1).name(), "date");
  EXPECT_EQ(snapshot->system_sections(1).hash(),
            HashBytes("Today is 2026-11-30."));
  EXPECT_EQ(ToolNames(*snapshot),
            (std::vector<std::string>{"read_file", "shell"}));
  EXPECT_EQ(snapshot->tools(0).schema_hash(), *HashJson(tools[2].definition));
  EXPECT_EQ(snapshot->tools(1).schema_hash(), *HashJson(tools[0].definition));
  EXPECT_TRUE(snapshot->cache_control().enabled());
  EXPECT_EQ(snapshot->cache_control().ttl_seconds(), 3600u);
  EXPECT_EQ(snapshot->options_hash(),
            HashBytes(R"({"thinking":{"budget_tokens":8000}})"));
  MessageChain chain;
  ASSERT_TRUE(chain.Update(blocks).ok());
  EXPECT_EQ(std::vector<uint64_t>(snapshot->message_chain().begin(),
                                  snapshot->message_chain().end()),
            chain.hashes());
  EXPECT_EQ(snapshot->expected_drop(), v1::EXPECTED_DROP_COMPACTION);
  EXPECT_EQ(snapshot->tool_order_policy(), v1::TOOL_ORDER_POLICY_LEXICOGRAPHIC);
}

// A breakpoint on the last tool is reported as "at the end of tools"
// (blocks_after 0) however many tools there are, so that adding a tool does
// not look like a cache_control change.
TEST(SnapshotBuilderTest, PlacesBreakpointsRelativeToTheirSegment) {
  const std::vector<Tool> tools = McpTools();
  const std::vector<std::string> blocks = {
      R"({"role":"user","type":"text","text":"hi"})",
      R"({"role":"assistant","type":"text","text":"hello"})",
      R"({"role":"user","type":"text","text":"go"})"};
  const SystemSectionText sections[] = {{"persona", "You are an agent."},
                                        {"date", "Today is 2026-11-30."}};
  v1::CacheControl cache_control;
  cache_control.set_enabled(true);
  auto add = [&](v1::PromptSegment segment, uint32_t index) {
    v1::Breakpoint* breakpoint = cache_control.add_breakpoints();
    breakpoint->set_segment(segment);
    breakpoint->set_index(index);
    return breakpoint;
  };
  add(v1::PROMPT_SEGMENT_TOOLS, 3);
  add(v1::PROMPT_SEGMENT_SYSTEM, 0);
  add(v1::PROMPT_SEGMENT_MESSAGES, 1);
  add(v1::PROMPT_SEGMENT_MESSAGES, 9);                    // Past the chain.
  add(v1::PROMPT_SEGMENT_TOOLS, 0)->set_blocks_after(7);  // The caller's.

  SnapshotBuilder builder(Options());
  ModelRequest request = Request(tools, blocks);
  request.system_sections = sections;
  request.cache_control = cache_control;
  const absl::StatusOr<v1::Snapshot> snapshot = builder.Build(request);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  const auto& breakpoints = snapshot->cache_control().breakpoints();
  ASSERT_EQ(breakpoints.size(), 5);
  EXPECT_EQ(breakpoints[0].blocks_after(), 0u);
  EXPECT_TRUE(breakpoints[0].has_blocks_after());
  EXPECT_EQ(breakpoints[1].blocks_after(), 1u);
  EXPECT_EQ(breakpoints[2].blocks_after(), 1u);
  EXPECT_FALSE(breakpoints[3].has_blocks_after());
  EXPECT_EQ(breakpoints[4].blocks_after(), 7u);
}

TEST(SnapshotBuilderTest, OptionalFieldsDefault) {
  SnapshotBuilder builder(Options());
  ModelRequest request = Request();
  request.time.reset();
  const system_clock::time_point before = system_clock::now();
  const absl::StatusOr<v1::Snapshot> snapshot = builder.Build(request);
  const system_clock::time_point after = system_clock::now();
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(
                           before.time_since_epoch())
                           .count();
  EXPECT_GE(snapshot->request_time().seconds(), seconds);
  EXPECT_LE(
      snapshot->request_time().seconds(),
      std::chrono::duration_cast<std::chrono::seconds>(after.time_since_epoch())
          .count());
  EXPECT_EQ(snapshot->lane(), "");
  EXPECT_EQ(snapshot->options_hash(), 0u);
  EXPECT_EQ(snapshot->message_chain_size(), 0);
  EXPECT_EQ(snapshot->tools_size(), 0);
  EXPECT_FALSE(snapshot->has_cache_control());
}

// The seed's case 6 end to end: two registries whose MCP tools registered in
// opposite orders report identical snapshots.
TEST(SnapshotBuilderTest, RegistrationOrderDoesNotChangeTheSnapshot) {
  std::vector<Tool> registry_a = McpTools();
  std::vector<Tool> registry_b = McpTools();
  std::swap(registry_b[2], registry_b[3]);
  std::swap(registry_b[0], registry_b[1]);

  SnapshotBuilder builder_a(Options());
  SnapshotBuilder builder_b(Options());
  const absl::StatusOr<v1::Snapshot> a = builder_a.Build(Request(registry_a));
  const absl::StatusOr<v1::Snapshot> b = builder_b.Build(Request(registry_b));
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(ToolNames(*a),
            (std::vector<std::string>{"mcp__filesystem__read_tree",
                                      "mcp__github__search_issues", "read_file",
                                      "shell"}));
  EXPECT_EQ(a->SerializeAsString(), b->SerializeAsString());
  v1::Snapshot tools_a;
  v1::Snapshot tools_b;
  *tools_a.mutable_tools() = a->tools();
  *tools_b.mutable_tools() = b->tools();
  EXPECT_EQ(HashBytes(tools_a.SerializeAsString()),
            HashBytes(tools_b.SerializeAsString()));
}

TEST(SnapshotBuilderTest, ReportsAnExplicitPolicy) {
  absl::StatusOr<ToolOrder> order =
      ToolOrder::Explicit({"shell", std::string(kToolOrderRest)});
  ASSERT_TRUE(order.ok());
  SnapshotBuilderOptions options = Options();
  options.tool_order = *order;
  SnapshotBuilder builder(std::move(options));
  const std::vector<Tool> tools = McpTools();
  const absl::StatusOr<v1::Snapshot> snapshot = builder.Build(Request(tools));
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(
      ToolNames(*snapshot),
      (std::vector<std::string>{"shell", "mcp__filesystem__read_tree",
                                "mcp__github__search_issues", "read_file"}));
  EXPECT_EQ(snapshot->tool_order_policy(), v1::TOOL_ORDER_POLICY_EXPLICIT);
}

TEST(SnapshotBuilderTest, DeferredToolJoinsWhenRevealed) {
  std::vector<Tool> tools = McpTools();
  tools.push_back(MakeTool("agent_search"));
  tools.back().should_defer = true;
  SnapshotBuilder builder(Options());
  EXPECT_EQ(builder.Build(Request(tools))->tools_size(), 4);
  tools.back().revealed = true;
  const absl::StatusOr<v1::Snapshot> snapshot = builder.Build(Request(tools));
  ASSERT_TRUE(snapshot.ok());
  EXPECT_EQ(ToolNames(*snapshot)[0], "agent_search");
  EXPECT_EQ(snapshot->tools(0).schema_hash(), *HashJson(tools[4].definition));
}

// The order is reused while the tools' names and flags stay the same, and
// recomputed as soon as one changes.
TEST(SnapshotBuilderTest, ReordersOnlyWhenTheToolsChange) {
  SnapshotBuilder builder(Options());
  std::vector<Tool> tools = {MakeTool("zeta"), MakeTool("alpha"),
                             MakeTool("mu")};
  absl::StatusOr<v1::Snapshot> first = builder.Build(Request(tools));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(ToolNames(*first),
            (std::vector<std::string>{"alpha", "mu", "zeta"}));
  absl::StatusOr<v1::Snapshot> same = builder.Build(Request(tools));
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(ToolNames(*same), ToolNames(*first));

  tools[1] = MakeTool("omega");
  absl::StatusOr<v1::Snapshot> renamed = builder.Build(Request(tools));
  ASSERT_TRUE(renamed.ok()) << renamed.status();
  EXPECT_EQ(ToolNames(*renamed),
            (std::vector<std::string>{"mu", "omega", "zeta"}));

  tools[0].should_defer = true;  // Now hidden.
  absl::StatusOr<v1::Snapshot> deferred = builder.Build(Request(tools));
  ASSERT_TRUE(deferred.ok()) << deferred.status();
  EXPECT_EQ(ToolNames(*deferred), (std::vector<std::string>{"mu", "omega"}));
}

// A system prompt is validated whenever it differs from the last valid one.
TEST(SnapshotBuilderTest, ValidatesEveryNewSystemPrompt) {
  SnapshotBuilder builder(Options());
  ModelRequest request = Request();
  ASSERT_TRUE(builder.Build(request).ok());
  request.system_prompt = "bad \xff byte";
  ExpectInvalid(builder.Build(request).status(), "system_prompt");
  ExpectInvalid(builder.Build(request).status(), "system_prompt");
}

TEST(SnapshotBuilderTest, MemoizesSchemaHashes) {
  std::vector<Tool> tools = McpTools();
  SnapshotBuilder builder(Options());
  const absl::StatusOr<v1::Snapshot> first = builder.Build(Request(tools));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(builder.stats().tool_definitions_canonicalized, 4u);

  // Unchanged schemas: nothing canonicalized, identical hashes.
  std::reverse(tools.begin(), tools.end());
  const absl::StatusOr<v1::Snapshot> second = builder.Build(Request(tools));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(builder.stats().tool_definitions_canonicalized, 4u);
  EXPECT_EQ(first->SerializeAsString(), second->SerializeAsString());

  // One schema changed: exactly that tool's hash changes.
  for (Tool& tool : tools) {
    if (tool.name == "shell") tool = MakeTool("shell", "Run a command.");
  }
  const absl::StatusOr<v1::Snapshot> third = builder.Build(Request(tools));
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(builder.stats().tool_definitions_canonicalized, 5u);
  ASSERT_EQ(third->tools_size(), 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(third->tools(i).name(), first->tools(i).name());
    EXPECT_EQ(third->tools(i).schema_hash() != first->tools(i).schema_hash(),
              third->tools(i).name() == "shell")
        << third->tools(i).name();
  }

  // A reformatted definition is canonicalized again, to the same hash.
  for (Tool& tool : tools) {
    if (tool.name == "shell") tool.definition = " " + tool.definition + "\n";
  }
  const absl::StatusOr<v1::Snapshot> fourth = builder.Build(Request(tools));
  ASSERT_TRUE(fourth.ok());
  EXPECT_EQ(builder.stats().tool_definitions_canonicalized, 6u);
  EXPECT_EQ(third->SerializeAsString(), fourth->SerializeAsString());
}

TEST(SnapshotBuilderTest, ExtendsTheMessageChainIncrementally) {
  std::vector<std::string> history;
  SnapshotBuilder builder(Options());
  for (int turn = 0; turn < 4; ++turn) {
    history.push_back(R"({"role":"user","type":"text","text":"turn )" +
                      std::to_string(turn) + R"("})");
    history.push_back(R"({"role":"assistant","type":"text","text":"ok"})");
    const absl::StatusOr<v1::Snapshot> incremental =
        builder.Build(Request({}, history));
    ASSERT_TRUE(incremental.ok());
    EXPECT_EQ(builder.stats().message_blocks_canonicalized, history.size());

    SnapshotBuilder scratch(Options());
    const absl::StatusOr<v1::Snapshot> from_scratch =
        scratch.Build(Request({}, history));
    ASSERT_TRUE(from_scratch.ok());
    EXPECT_EQ(incremental->SerializeAsString(),
              from_scratch->SerializeAsString());
  }
}

TEST(SnapshotBuilderTest, RejectsMissingOrInvalidFields) {
  SnapshotBuilder no_agent({.session_id = "s"});
  ExpectInvalid(no_agent.Build(Request()).status(), "agent is required");
  SnapshotBuilder long_agent(
      {.agent = std::string(129, 'a'), .session_id = "s"});
  ExpectInvalid(long_agent.Build(Request()).status(), "more than 128");
  SnapshotBuilder no_session({.agent = "a"});
  ExpectInvalid(no_session.Build(Request()).status(), "session_id is required");

  SnapshotBuilder builder(Options());
  ModelRequest request = Request();
  request.request_id = "";
  ExpectInvalid(builder.Build(request).status(), "request_id is required");
  request = Request();
  request.model = "";
  ExpectInvalid(builder.Build(request).status(), "model is required");
  request = Request();
  request.provider = v1::PROVIDER_UNSPECIFIED;
  ExpectInvalid(builder.Build(request).status(), "provider is required");
  request = Request();
  request.system_prompt = "\xC3";
  ExpectInvalid(builder.Build(request).status(),
                "system_prompt is not valid UTF-8");
  const SystemSectionText unnamed[] = {{"", "text"}};
  request = Request();
  request.system_sections = unnamed;
  ExpectInvalid(builder.Build(request).status(),
                "system section #0 name is required");
  request = Request();
  request.options_json = "{";
  ExpectInvalid(builder.Build(request).status(), "options_json");
}

TEST(SnapshotBuilderTest, RejectsBadToolsAndBlocks) {
  SnapshotBuilder builder(Options());
  std::vector<Tool> tools = McpTools();
  tools[1].definition = R"({"name":"shell",)";
  ExpectInvalid(builder.Build(Request(tools)).status(),
                "tool \"shell\" definition");

  tools = McpTools();
  tools.push_back({.name = std::string(kToolOrderRest), .definition = "{}"});
  ExpectInvalid(builder.Build(Request(tools)).status(), "reserved");

  const std::vector<std::string> blocks = {"{}", "[1,]"};
  ExpectInvalid(builder.Build(Request({}, blocks)).status(), "message block 1");
}

TEST(SnapshotBuilderTest, FailedBuildChangesNothing) {
  const std::vector<Tool> tools = McpTools();
  std::vector<std::string> blocks = {"{}", "[]"};
  SnapshotBuilder builder(Options());
  const absl::StatusOr<v1::Snapshot> good =
      builder.Build(Request(tools, blocks));
  ASSERT_TRUE(good.ok());

  // New tools hashed, then a bad block: the memo and chain stay as they were.
  std::vector<Tool> more_tools = tools;
  more_tools.push_back(MakeTool("extra"));
  blocks.push_back("not json");
  EXPECT_FALSE(builder.Build(Request(more_tools, blocks)).ok());
  EXPECT_EQ(builder.stats().tool_definitions_canonicalized, 4u);
  EXPECT_EQ(builder.stats().message_blocks_canonicalized, 2u);

  blocks.pop_back();
  const absl::StatusOr<v1::Snapshot> again =
      builder.Build(Request(tools, blocks));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(builder.stats().tool_definitions_canonicalized, 4u);
  EXPECT_EQ(builder.stats().message_blocks_canonicalized, 2u);
  EXPECT_EQ(good->SerializeAsString(), again->SerializeAsString());
}

TEST(SnapshotBuilderTest, SameDefinitionTwiceIsCanonicalizedOnce) {
  std::vector<Tool> tools = {MakeTool("search"), MakeTool("search")};
  tools[1].display_name = "Code Search";
  SnapshotBuilder builder(Options());
  const absl::StatusOr<v1::Snapshot> snapshot = builder.Build(Request(tools));
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  ASSERT_EQ(snapshot->tools_size(), 2);
  EXPECT_EQ(snapshot->tools(0).schema_hash(), snapshot->tools(1).schema_hash());
  EXPECT_EQ(builder.stats().tool_definitions_canonicalized, 1u);
}

TEST(SnapshotBuilderTest, HiddenToolsAreNotHashed) {
  std::vector<Tool> tools = McpTools();
  tools.push_back(
      {.name = "later", .definition = "not yet loaded", .should_defer = true});
  SnapshotBuilder builder(Options());
  const absl::StatusOr<v1::Snapshot> snapshot = builder.Build(Request(tools));
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(snapshot->tools_size(), 4);
  EXPECT_EQ(builder.stats().tool_definitions_canonicalized, 4u);
}

}  // namespace
}  // namespace cachewatch::client
