#include "daemon/receiver/proxy/observed_request.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cachewatch/client/hash.h"
#include "cachewatch/client/snapshot_builder.h"
#include "cachewatch/client/tool_order.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace cachewatch {
namespace {

using Json = nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr size_t kLimit = size_t{32} << 20;

ObservedRequest MustRead(ProxyApi api, const Json& body,
                         const HttpHeaders& headers = {}) {
  const v1::Provider provider = api == ProxyApi::kAnthropicMessages
                                    ? v1::PROVIDER_ANTHROPIC
                                    : v1::PROVIDER_OPENAI;
  absl::StatusOr<ObservedRequest> read =
      ReadObservedRequest(api, provider, headers, body.dump(), kLimit);
  EXPECT_TRUE(read.ok()) << read.status();
  return read.ok() ? *std::move(read) : ObservedRequest();
}

Json ReadVectors(const std::string& file) {
  std::ifstream in(std::string(CACHEWATCH_VECTORS_DIR) + "/" + file,
                   std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return Json::parse(text.str());
}

std::string Hex(uint64_t hash) {
  char buffer[17];
  std::snprintf(buffer, sizeof(buffer), "%016llx",
                static_cast<unsigned long long>(hash));
  return buffer;
}

Json Vector(const Json& vectors, std::string_view name) {
  for (const Json& vector : vectors) {
    if (vector.at("name") == name) return vector;
  }
  ADD_FAILURE() << "no vector " << name;
  return Json();
}

Json AnthropicBody() {
  return {
      {"model", "claude-sonnet-4-5"},
      {"max_tokens", 1024},
      {"system",
       Json::array({{{"type", "text"}, {"text", "You are a coding agent."}},
                    {{"type", "text"},
                     {"text", "Today is 2026-12-01."},
                     {"cache_control", {{"type", "ephemeral"}}}}})},
      {"tools",
       Json::array(
           {{{"name", "zeta"}, {"input_schema", {{"type", "object"}}}},
            {{"name", "alpha"},
             {"input_schema", {{"type", "object"}}},
             {"cache_control", {{"type", "ephemeral"}, {"ttl", "1h"}}}}})},
      {"messages",
       Json::array(
           {{{"role", "user"}, {"content", "Fix the test"}},
            {{"role", "assistant"},
             {"content", Json::array({{{"type", "text"}, {"text", "Looking"}},
                                      {{"type", "tool_use"},
                                       {"id", "toolu_1"},
                                       {"name", "zeta"},
                                       {"input", {{"x", 1}}}}})}},
            {{"role", "user"},
             {"content",
              Json::array({{{"type", "tool_result"},
                            {"tool_use_id", "toolu_1"},
                            {"content", "ok"},
                            {"cache_control", {{"type", "ephemeral"}}}}})}}})},
  };
}

// The shared vectors: tool definitions sent in a request hash as the
// vectors say, and messages built from the chain vector's blocks chain as
// it says.
TEST(ObservedRequestTest, ToolHashesMatchTheSharedVectors) {
  const Json vectors = ReadVectors("canonical_json.json");
  Json body = AnthropicBody();
  body["tools"] = Json::array();
  std::vector<std::string> expected;
  for (const char* name : {"tool_anthropic_read_file", "tool_anthropic_shell",
                           "tool_mcp_github_search_issues"}) {
    const Json vector = Vector(vectors, name);
    body["tools"].push_back(Json::parse(vector.at("input").get<std::string>()));
    expected.push_back(vector.at("xxh3_64"));
  }
  const ObservedRequest read = MustRead(ProxyApi::kAnthropicMessages, body);
  ASSERT_EQ(read.snapshot.tools_size(), 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Hex(read.snapshot.tools(i).schema_hash()), expected[i]);
  }
  EXPECT_EQ(read.snapshot.tools(0).name(), "read_file");
  EXPECT_EQ(read.snapshot.tools(2).name(), "mcp__github__search_issues");

  Json chat = {
      {"model", "gpt-5"},
      {"messages", Json::array({{{"role", "user"}, {"content", "hi"}}})},
      {"tools", Json::array({Json::parse(Vector(vectors, "tool_openai_function")
                                             .at("input")
                                             .get<std::string>())})}};
  const ObservedRequest openai = MustRead(ProxyApi::kOpenAiChat, chat);
  ASSERT_EQ(openai.snapshot.tools_size(), 1);
  EXPECT_EQ(openai.snapshot.tools(0).name(), "get_weather");
  EXPECT_EQ(Hex(openai.snapshot.tools(0).schema_hash()),
            Vector(vectors, "tool_openai_function").at("xxh3_64"));
}

TEST(ObservedRequestTest, MessageChainMatchesTheSharedVector) {
  const Json vectors = ReadVectors("message_chain.json");
  Json messages = Json::array();
  // The first four blocks are content blocks with a role: one message each.
  for (int i = 0; i < 4; ++i) {
    Json block = Json::parse(vectors.at("blocks")[i].get<std::string>());
    const std::string role = block.at("role");
    block.erase("role");
    messages.push_back({{"role", role}, {"content", Json::array({block})}});
  }
  Json body = {{"model", "claude-sonnet-4-5"}, {"messages", messages}};
  const ObservedRequest read = MustRead(ProxyApi::kAnthropicMessages, body);
  ASSERT_EQ(read.snapshot.message_chain_size(), 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(Hex(read.snapshot.message_chain(i)),
              vectors.at("chain")[i].get<std::string>());
  }
}

// The proxy's snapshot is the client library's for the same request, the
// tools kept in request order (an explicit order listing them as sent).
TEST(ObservedRequestTest, SnapshotEqualsTheClientLibrarysForTheSameRequest) {
  const Json body = AnthropicBody();
  const HttpHeaders headers = {{"anthropic-beta", "b-2, a-1"}};
  ObservedRequest read = MustRead(ProxyApi::kAnthropicMessages, body, headers);

  std::vector<client::Tool> tools;
  std::vector<std::string> order;
  for (const Json& tool : body["tools"]) {
    order.push_back(tool["name"]);
    tools.push_back({.name = tool["name"], .definition = tool.dump()});
  }
  order.push_back(client::kToolOrderRest);
  std::vector<std::string> blocks = {
      Json{{"role", "user"}, {"type", "text"}, {"text", "Fix the test"}}.dump(),
      Json{{"role", "assistant"}, {"type", "text"}, {"text", "Looking"}}.dump(),
      Json{{"role", "assistant"},
           {"type", "tool_use"},
           {"id", "toolu_1"},
           {"name", "zeta"},
           {"input", {{"x", 1}}}}
          .dump(),
      Json{{"role", "user"},
           {"type", "tool_result"},
           {"tool_use_id", "toolu_1"},
           {"content", "ok"}}
          .dump()};
  const client::SystemSectionText sections[] = {
      {"system[0]", "You are a coding agent."},
      {"system[1]", "Today is 2026-12-01."}};
  const std::string options =
      Json{{"betas", {"a-1", "b-2"}}}.dump();  // No other keying option set.
  client::SnapshotBuilder builder(
      {.agent = "a",
       .session_id = "s",
       .tool_order = *client::ToolOrder::Explicit(order)});
  absl::StatusOr<v1::Snapshot> expected = builder.Build({
      .request_id = "r",
      .time = std::chrono::system_clock::time_point(),
      .provider = v1::PROVIDER_ANTHROPIC,
      .model = "claude-sonnet-4-5",
      .system_prompt = "You are a coding agent.\n\nToday is 2026-12-01.",
      .system_sections = sections,
      .tools = tools,
      .message_blocks = blocks,
      .options_json = options,
      .cache_control = read.snapshot.cache_control(),
  });
  ASSERT_TRUE(expected.ok()) << expected.status();
  expected->clear_agent();
  expected->clear_session_id();
  expected->clear_request_id();
  expected->clear_request_time();
  expected->set_tool_order_policy(v1::TOOL_ORDER_POLICY_REGISTRATION);
  std::string difference;
  google::protobuf::util::MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&difference);
  EXPECT_TRUE(differencer.Compare(*expected, read.snapshot)) << difference;
  EXPECT_THAT(read.snapshot.tools(), testing::SizeIs(2));
  EXPECT_EQ(read.snapshot.tools(0).name(), "zeta");  // As sent, not sorted.
}

TEST(ObservedRequestTest, AnthropicCacheControlLayout) {
  Json body = AnthropicBody();
  body["cache_control"] = {{"type", "ephemeral"}, {"ttl", "1h"}};
  const v1::CacheControl layout =
      MustRead(ProxyApi::kAnthropicMessages, body).snapshot.cache_control();
  EXPECT_TRUE(layout.enabled());
  EXPECT_TRUE(layout.automatic());
  EXPECT_EQ(layout.ttl_seconds(), 3600u);
  ASSERT_EQ(layout.breakpoints_size(), 3);
  // Tools: alpha, the second tool, 1 h.
  EXPECT_EQ(layout.breakpoints(0).segment(), v1::PROMPT_SEGMENT_TOOLS);
  EXPECT_EQ(layout.breakpoints(0).index(), 1u);
  EXPECT_EQ(layout.breakpoints(0).ttl_seconds(), 3600u);
  // System: the second block, the default TTL.
  EXPECT_EQ(layout.breakpoints(1).segment(), v1::PROMPT_SEGMENT_SYSTEM);
  EXPECT_EQ(layout.breakpoints(1).index(), 1u);
  EXPECT_EQ(layout.breakpoints(1).ttl_seconds(), 0u);
  // Messages: the tool_result, the fourth content block.
  EXPECT_EQ(layout.breakpoints(2).segment(), v1::PROMPT_SEGMENT_MESSAGES);
  EXPECT_EQ(layout.breakpoints(2).index(), 3u);

  Json plain = AnthropicBody();
  plain["system"] = "s";
  plain["tools"][1].erase("cache_control");
  plain["messages"][2]["content"][0].erase("cache_control");
  EXPECT_FALSE(MustRead(ProxyApi::kAnthropicMessages, plain)
                   .snapshot.cache_control()
                   .enabled());
}

// A breakpoint that moves to the newest message (as agents move it every
// turn) changes the layout, never the chain. A tool's hash covers its
// definition as sent, marker included (the shared contract).
TEST(ObservedRequestTest, MovingAMessageBreakpointKeepsTheChain) {
  Json before = AnthropicBody();
  Json after = AnthropicBody();
  after["messages"][2]["content"][0].erase("cache_control");
  after["messages"][0]["content"] =
      Json::array({{{"type", "text"},
                    {"text", "Fix the test"},
                    {"cache_control", {{"type", "ephemeral"}}}}});
  after["tools"][1].erase("cache_control");
  after["tools"][0]["cache_control"] = {{"type", "ephemeral"}};
  const v1::Snapshot a =
      MustRead(ProxyApi::kAnthropicMessages, before).snapshot;
  const v1::Snapshot b = MustRead(ProxyApi::kAnthropicMessages, after).snapshot;
  EXPECT_THAT(b.message_chain(), testing::ElementsAreArray(a.message_chain()));
  ASSERT_EQ(a.tools_size(), b.tools_size());
  for (int i = 0; i < a.tools_size(); ++i) {
    EXPECT_NE(a.tools(i).schema_hash(), b.tools(i).schema_hash());
  }
  EXPECT_EQ(b.cache_control().breakpoints(0).index(), 0u);
  EXPECT_EQ(b.cache_control().breakpoints(2).index(), 0u);
}

// A marker on a block inside a tool_result's content is a breakpoint on the
// tool_result, and not part of its content: the chain is the one without it.
TEST(ObservedRequestTest, AMarkerInsideAToolResultIsABreakpointNotContent) {
  const Json result = {
      {"type", "tool_result"},
      {"tool_use_id", "toolu_1"},
      {"content", Json::array({{{"type", "text"}, {"text", "out"}}})}};
  Json plain = AnthropicBody();
  plain["messages"].push_back(
      {{"role", "user"}, {"content", Json::array({result})}});
  Json marked = plain;
  marked["messages"].back()["content"][0]["content"][0]["cache_control"] = {
      {"type", "ephemeral"}, {"ttl", "1h"}};
  const v1::Snapshot a = MustRead(ProxyApi::kAnthropicMessages, plain).snapshot;
  const v1::Snapshot b =
      MustRead(ProxyApi::kAnthropicMessages, marked).snapshot;
  EXPECT_THAT(b.message_chain(), testing::ElementsAreArray(a.message_chain()));
  ASSERT_EQ(b.cache_control().breakpoints_size(),
            a.cache_control().breakpoints_size() + 1);
  const v1::Breakpoint& added = *b.cache_control().breakpoints().rbegin();
  EXPECT_EQ(added.segment(), v1::PROMPT_SEGMENT_MESSAGES);
  EXPECT_EQ(added.index(), static_cast<uint32_t>(b.message_chain_size() - 1));
  EXPECT_EQ(added.ttl_seconds(), 3600u);
}

TEST(ObservedRequestTest, AnthropicSystemSections) {
  Json body = AnthropicBody();
  const v1::Snapshot snapshot =
      MustRead(ProxyApi::kAnthropicMessages, body).snapshot;
  ASSERT_EQ(snapshot.system_sections_size(), 2);
  EXPECT_EQ(snapshot.system_sections(0).name(), "system[0]");
  EXPECT_EQ(snapshot.system_sections(0).hash(),
            client::HashBytes("You are a coding agent."));
  EXPECT_EQ(snapshot.system_sections(1).hash(),
            client::HashBytes("Today is 2026-12-01."));

  body["system"] = "One prompt.";
  const v1::Snapshot plain =
      MustRead(ProxyApi::kAnthropicMessages, body).snapshot;
  EXPECT_EQ(plain.system_hash(), client::HashBytes("One prompt."));
  EXPECT_EQ(plain.system_sections_size(), 0);
}

TEST(ObservedRequestTest, ToolNames) {
  Json body = AnthropicBody();
  body["tools"] =
      Json::array({{{"type", "web_search_20250305"}, {"name", "web_search"}},
                   {{"type", "mcp_toolset"}, {"mcp_server_name", "github"}},
                   {{"type", "bash_20250124"}},
                   {{"input_schema", {{"type", "object"}}}}});
  const v1::Snapshot snapshot =
      MustRead(ProxyApi::kAnthropicMessages, body).snapshot;
  ASSERT_EQ(snapshot.tools_size(), 4);
  EXPECT_EQ(snapshot.tools(0).name(), "web_search");
  EXPECT_EQ(snapshot.tools(1).name(), "github");
  EXPECT_EQ(snapshot.tools(2).name(), "bash_20250124");
  EXPECT_EQ(snapshot.tools(3).name(), "tools[3]");
}

TEST(ObservedRequestTest, DeferredToolsAreNotListed) {
  Json body = AnthropicBody();
  body["tools"].push_back({{"name", "later"}, {"defer_loading", true}});
  const v1::Snapshot snapshot =
      MustRead(ProxyApi::kAnthropicMessages, body).snapshot;
  EXPECT_EQ(snapshot.tools_size(), 2);
}

uint64_t OptionsHash(ProxyApi api, const Json& body,
                     const HttpHeaders& headers = {}) {
  return MustRead(api, body, headers).snapshot.options_hash();
}

TEST(ObservedRequestTest, AnthropicOptionsHashKeysOnCacheKeyingOptions) {
  const Json base = AnthropicBody();
  const uint64_t hash = OptionsHash(ProxyApi::kAnthropicMessages, base);
  EXPECT_NE(hash, 0u);
  const struct {
    const char* what;
    Json body;
    HttpHeaders headers;
    bool changes;
  } kCases[] = {
      {"thinking",
       [&] {
         Json b = base;
         b["thinking"] = {{"type", "enabled"}, {"budget_tokens", 8000}};
         return b;
       }(),
       {},
       true},
      {"tool_choice",
       [&] {
         Json b = base;
         b["tool_choice"] = {{"type", "any"}};
         return b;
       }(),
       {},
       true},
      {"output_config (effort)",
       [&] {
         Json b = base;
         b["output_config"] = {{"effort", "low"}};
         return b;
       }(),
       {},
       true},
      {"speed",
       [&] {
         Json b = base;
         b["speed"] = "fast";
         return b;
       }(),
       {},
       true},
      {"context_management",
       [&] {
         Json b = base;
         b["context_management"] = Json::object();
         return b;
       }(),
       {},
       true},
      {"anthropic-beta header",
       base,
       {{"anthropic-beta", "context-1m-2025-08-07"}},
       true},
      {"max_tokens",
       [&] {
         Json b = base;
         b["max_tokens"] = 64000;
         return b;
       }(),
       {},
       false},
      {"temperature",
       [&] {
         Json b = base;
         b["temperature"] = 0.2;
         return b;
       }(),
       {},
       false},
      {"stream",
       [&] {
         Json b = base;
         b["stream"] = true;
         return b;
       }(),
       {},
       false},
      {"metadata",
       [&] {
         Json b = base;
         b["metadata"] = {{"user_id", "u"}};
         return b;
       }(),
       {},
       false},
      {"stop_sequences",
       [&] {
         Json b = base;
         b["stop_sequences"] = {"x"};
         return b;
       }(),
       {},
       false},
      {"other headers",
       base,
       {{"anthropic-version", "2023-06-01"}, {"x-api-key", "k"}},
       false},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(
        OptionsHash(ProxyApi::kAnthropicMessages, c.body, c.headers) != hash,
        c.changes);
  }
  // The betas are a set: order, repetition and spacing do not count.
  EXPECT_EQ(
      OptionsHash(ProxyApi::kAnthropicMessages, base,
                  {{"anthropic-beta", "a,b"}}),
      OptionsHash(ProxyApi::kAnthropicMessages, base,
                  {{"anthropic-beta", " b"}, {"anthropic-beta", "a, b"}}));
}

Json ChatBody() {
  return {
      {"model", "gpt-5"},
      {"messages",
       Json::array(
           {{{"role", "system"}, {"content", "Be brief."}},
            {{"role", "developer"}, {"content", "Use tools."}},
            {{"role", "user"}, {"content", "What is 2+2?"}},
            {{"role", "assistant"},
             {"content", nullptr},
             {"tool_calls", Json::array({{{"id", "call_1"},
                                          {"type", "function"},
                                          {"function",
                                           {{"name", "calc"},
                                            {"arguments", "{\"x\":2}"}}}}})}},
            {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "4"}}})},
      {"tools", Json::array({{{"type", "function"},
                              {"function", {{"name", "calc"}}}}})}};
}

TEST(ObservedRequestTest, OpenAiChatSnapshot) {
  const v1::Snapshot snapshot =
      MustRead(ProxyApi::kOpenAiChat, ChatBody()).snapshot;
  EXPECT_EQ(snapshot.model(), "gpt-5");
  EXPECT_EQ(snapshot.system_hash(),
            client::HashBytes("Be brief.\n\nUse tools."));
  ASSERT_EQ(snapshot.system_sections_size(), 2);
  EXPECT_EQ(snapshot.system_sections(0).name(), "system[0]");
  EXPECT_EQ(snapshot.system_sections(1).name(), "developer[1]");
  // user text, the tool call, the tool result.
  EXPECT_EQ(snapshot.message_chain_size(), 3);
  ASSERT_EQ(snapshot.tools_size(), 1);
  EXPECT_EQ(snapshot.tools(0).name(), "calc");
  EXPECT_TRUE(snapshot.cache_control().enabled());
  EXPECT_TRUE(snapshot.cache_control().automatic());
  EXPECT_EQ(snapshot.cache_control().ttl_seconds(), 0u);

  Json extended = ChatBody();
  extended["prompt_cache_retention"] = "24h";
  EXPECT_EQ(MustRead(ProxyApi::kOpenAiChat, extended)
                .snapshot.cache_control()
                .ttl_seconds(),
            86400u);
}

// DashScope's explicit cache: cache_control on content parts of an
// OpenAI-compatible request.
TEST(ObservedRequestTest, DashScopeExplicitCacheBreakpoints) {
  Json body = {
      {"model", "qwen-plus"},
      {"messages",
       Json::array(
           {{{"role", "system"},
             {"content",
              Json::array({{{"type", "text"},
                            {"text", "Long rules."},
                            {"cache_control", {{"type", "ephemeral"}}}}})}},
            {{"role", "user"},
             {"content",
              Json::array({{{"type", "text"},
                            {"text", "question"},
                            {"cache_control", {{"type", "ephemeral"}}}}})}}})}};
  const v1::Snapshot snapshot = MustRead(ProxyApi::kOpenAiChat, body).snapshot;
  const v1::CacheControl& layout = snapshot.cache_control();
  EXPECT_TRUE(layout.enabled());
  EXPECT_FALSE(layout.automatic());
  ASSERT_EQ(layout.breakpoints_size(), 2);
  EXPECT_EQ(layout.breakpoints(0).segment(), v1::PROMPT_SEGMENT_SYSTEM);
  EXPECT_EQ(layout.breakpoints(0).index(), 0u);
  EXPECT_EQ(layout.breakpoints(1).segment(), v1::PROMPT_SEGMENT_MESSAGES);
  EXPECT_EQ(layout.breakpoints(1).index(), 0u);
  // The markers are not content: the same texts without them hash alike.
  Json plain = body;
  plain["messages"][0]["content"][0].erase("cache_control");
  plain["messages"][1]["content"][0].erase("cache_control");
  const v1::Snapshot unmarked = MustRead(ProxyApi::kOpenAiChat, plain).snapshot;
  EXPECT_EQ(unmarked.system_hash(), snapshot.system_hash());
  EXPECT_EQ(unmarked.message_chain(0), snapshot.message_chain(0));
}

TEST(ObservedRequestTest, OpenAiOptionsHashKeysOnCacheKeyingOptions) {
  const Json base = ChatBody();
  const uint64_t hash = OptionsHash(ProxyApi::kOpenAiChat, base);
  const struct {
    const char* key;
    Json value;
    bool changes;
  } kCases[] = {
      {"reasoning_effort", "high", true},
      {"prompt_cache_key", "k", true},
      {"service_tier", "flex", true},
      {"response_format", {{"type", "json_object"}}, true},
      {"tool_choice", "required", true},
      {"parallel_tool_calls", false, true},
      {"verbosity", "low", true},
      {"max_tokens", 100, false},
      {"max_completion_tokens", 100, false},
      {"temperature", 0.5, false},
      {"stream", true, false},
      {"stream_options", {{"include_usage", true}}, false},
      {"user", "u", false},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.key);
    Json body = base;
    body[c.key] = c.value;
    EXPECT_EQ(OptionsHash(ProxyApi::kOpenAiChat, body) != hash, c.changes);
  }
}

TEST(ObservedRequestTest, ResponsesSnapshot) {
  Json body = {{"model", "gpt-5.6"},
               {"instructions", "Be brief."},
               {"input", Json::array({{{"role", "user"}, {"content", "hi"}},
                                      {{"type", "function_call_output"},
                                       {"call_id", "c"},
                                       {"output", "4"}}})},
               {"reasoning", {{"effort", "low"}}},
               {"text", {{"verbosity", "low"}}}};
  const ObservedRequest read = MustRead(ProxyApi::kOpenAiResponses, body);
  EXPECT_EQ(read.snapshot.system_hash(), client::HashBytes("Be brief."));
  EXPECT_EQ(read.snapshot.message_chain_size(), 2);
  EXPECT_FALSE(read.compaction_marker);

  Json effort = body;
  effort["reasoning"]["effort"] = "high";
  EXPECT_NE(OptionsHash(ProxyApi::kOpenAiResponses, effort),
            read.snapshot.options_hash());
  Json format = body;
  format["text"]["format"] = {{"type", "json_object"}};
  EXPECT_NE(OptionsHash(ProxyApi::kOpenAiResponses, format),
            read.snapshot.options_hash());

  Json string_input = body;
  string_input["input"] = "hi";
  EXPECT_EQ(MustRead(ProxyApi::kOpenAiResponses, string_input)
                .snapshot.message_chain(0),
            read.snapshot.message_chain(0));

  Json continued = body;
  continued["previous_response_id"] = "resp_1";
  const ObservedRequest server_side =
      MustRead(ProxyApi::kOpenAiResponses, continued);
  EXPECT_EQ(server_side.previous_response_id, "resp_1");
  EXPECT_EQ(server_side.snapshot.message_chain_size(), 0);

  Json compacted = body;
  compacted["input"].push_back(
      {{"type", "compaction"}, {"encrypted_content", "..."}});
  EXPECT_TRUE(
      MustRead(ProxyApi::kOpenAiResponses, compacted).compaction_marker);
}

TEST(ObservedRequestTest, SessionIdFromTheBody) {
  const struct {
    Json metadata;
    std::string session;
  } kCases[] = {
      {{{"user_id",
         "user_"
         "5dd07c33da27e6d2968d94ea20bf47a7b090b6b158b82328d54da2909a108e84_"
         "account__session_d2e70091-3007-41a3-a916-cb8b0d3098de"}},
       "d2e70091-3007-41a3-a916-cb8b0d3098de"},
      {{{"user_id",
         "{\"device_id\":\"3f4a\",\"account_uuid\":\"\",\"session_id\":"
         "\"2c4e1cf0-7a67-4d2e-9a4b-1d16d3f44752\"}"}},
       "2c4e1cf0-7a67-4d2e-9a4b-1d16d3f44752"},
      {{{"user_id", "same-user-across-chats"}}, ""},
      {{{"user_id", "{not json"}}, ""},
      {{{"user_id", 42}}, ""},
      {Json::object(), ""},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.metadata.dump());
    Json body = AnthropicBody();
    body["metadata"] = c.metadata;
    EXPECT_EQ(MustRead(ProxyApi::kAnthropicMessages, body).body_session_id,
              c.session);
  }
  Json chat = ChatBody();
  chat["prompt_cache_key"] = "conversation-7";
  EXPECT_EQ(MustRead(ProxyApi::kOpenAiChat, chat).body_session_id,
            "conversation-7");
}

TEST(ObservedRequestTest, ClaudeCodeCompactionMarker) {
  Json body = AnthropicBody();
  body["messages"] = Json::array(
      {{{"role", "user"},
        {"content",
         "This session is being continued from a previous conversation that "
         "ran out of context. The summary below covers ..."}}});
  EXPECT_TRUE(MustRead(ProxyApi::kAnthropicMessages, body).compaction_marker);
  EXPECT_FALSE(MustRead(ProxyApi::kAnthropicMessages, AnthropicBody())
                   .compaction_marker);
}

TEST(ObservedRequestTest, PrefixIdentityFollowsSystemAndTools) {
  const uint64_t base =
      MustRead(ProxyApi::kAnthropicMessages, AnthropicBody()).prefix_identity;
  Json other_messages = AnthropicBody();
  other_messages["messages"] =
      Json::array({{{"role", "user"}, {"content", "Another task"}}});
  EXPECT_EQ(
      MustRead(ProxyApi::kAnthropicMessages, other_messages).prefix_identity,
      base);
  Json other_system = AnthropicBody();
  other_system["system"] = "A subagent.";
  EXPECT_NE(
      MustRead(ProxyApi::kAnthropicMessages, other_system).prefix_identity,
      base);
}

TEST(ObservedRequestTest, MalformedBodiesAreInvalidArgumentNamingTheProblem) {
  const struct {
    ProxyApi api;
    std::string body;
    std::string message;
  } kCases[] = {
      {ProxyApi::kAnthropicMessages, "", "malformed JSON at byte 1"},
      {ProxyApi::kAnthropicMessages, "{\"model\":", "malformed JSON"},
      {ProxyApi::kAnthropicMessages, "[1]", "is a JSON array, not an object"},
      {ProxyApi::kAnthropicMessages, "{\"messages\":[]}", "model is missing"},
      {ProxyApi::kAnthropicMessages, "{\"model\":\"m\"}",
       "messages is missing"},
      {ProxyApi::kAnthropicMessages,
       "{\"model\":\"m\",\"messages\":[{\"content\":\"x\"}]}",
       "messages[0] has no role"},
      {ProxyApi::kAnthropicMessages,
       "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":7}]}",
       "messages[0].content is missing or not a string or an array"},
      {ProxyApi::kAnthropicMessages,
       "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[1]}]}",
       "messages[0].content[0] is not an object"},
      {ProxyApi::kAnthropicMessages,
       "{\"model\":\"m\",\"messages\":[],\"tools\":{}}",
       "tools is not an array"},
      {ProxyApi::kAnthropicMessages,
       "{\"model\":\"m\",\"messages\":[],\"tools\":[\"x\"]}",
       "tools[0] is not an object"},
      {ProxyApi::kAnthropicMessages,
       "{\"model\":\"m\",\"messages\":[],\"system\":5}",
       "system is not a string or an array"},
      {ProxyApi::kAnthropicMessages,
       "{\"model\":\"m\",\"messages\":[],\"tools\":[{\"name\":\"t\",\"x\":"
       "1e400}]}",
       "a number is out of range"},
      {ProxyApi::kOpenAiChat, "{\"model\":\"m\",\"messages\":[5]}",
       "messages[0] is not an object"},
      {ProxyApi::kOpenAiChat,
       "{\"model\":\"m\",\"messages\":[{\"role\":\"assistant\",\"tool_calls\":{"
       "}}]}",
       "messages[0].tool_calls is not an array"},
      {ProxyApi::kOpenAiResponses, "{\"model\":\"m\",\"input\":5}",
       "input is not a string or an array"},
      {ProxyApi::kOpenAiResponses, "{\"model\":\"m\",\"input\":[7]}",
       "input[0] is not an object"},
      {ProxyApi::kAnthropicMessages,
       std::string(300, '[') + std::string(300, ']'), "nests deeper than 256"},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.body.substr(0, 80));
    absl::StatusOr<ObservedRequest> read =
        ReadObservedRequest(c.api, v1::PROVIDER_ANTHROPIC, {}, c.body, kLimit);
    ASSERT_FALSE(read.ok());
    EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(read.status().message(), HasSubstr("request body: "));
    EXPECT_THAT(read.status().message(), HasSubstr(c.message));
  }
}

TEST(ObservedRequestTest, BodiesOverTheLimitAreResourceExhausted) {
  const std::string body = AnthropicBody().dump();
  absl::StatusOr<ObservedRequest> read =
      ReadObservedRequest(ProxyApi::kAnthropicMessages, v1::PROVIDER_ANTHROPIC,
                          {}, body, body.size() - 1);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(ReadObservedRequest(ProxyApi::kAnthropicMessages,
                                  v1::PROVIDER_ANTHROPIC, {}, body, body.size())
                  .ok());
}

}  // namespace
}  // namespace cachewatch
