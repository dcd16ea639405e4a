#include "daemon/receiver/proxy/exchange_observer.h"

#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace cachewatch {
namespace {

using Json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kSecret[] = "SECRET-PROMPT-TEXT";

Json Messages(int turns) {
  Json messages = Json::array();
  for (int i = 0; i < turns; ++i) {
    messages.push_back({{"role", "user"},
                        {"content", std::string(kSecret) + std::to_string(i)}});
    messages.push_back(
        {{"role", "assistant"}, {"content", "answer " + std::to_string(i)}});
  }
  messages.push_back({{"role", "user"}, {"content", "next"}});
  return messages;
}

Json AnthropicBody(int turns, std::string system = "You are an agent.") {
  return {{"model", "claude-sonnet-4-5"},
          {"max_tokens", 1000},
          {"system", system + kSecret},
          {"tools", Json::array({{{"name", "read"},
                                  {"description", kSecret},
                                  {"input_schema", {{"type", "object"}}}}})},
          {"messages", Messages(turns)}};
}

HttpExchange AnthropicExchange(const Json& body, std::string response_id,
                               HttpHeaders headers = {}) {
  HttpExchange exchange;
  exchange.method = "POST";
  exchange.target = "/v1/messages?beta=true";
  exchange.request_headers = std::move(headers);
  exchange.request_headers.push_back({"anthropic-version", "2023-06-01"});
  exchange.request_body = body.dump();
  exchange.upstream_host = "api.anthropic.com";
  exchange.response_status = 200;
  exchange.response_headers = {{"content-type", "application/json"},
                               {"request-id", "req_1"}};
  exchange.response_body = Json{
      {"id", response_id},
      {"model", "claude-sonnet-4-5-20250929"},
      {"content", Json::array({{{"type", "text"}, {"text", kSecret}}})},
      {"usage",
       {{"input_tokens", 3},
        {"cache_read_input_tokens", 1000},
        {"output_tokens",
         20}}}}.dump();
  exchange.response_complete = true;
  exchange.request_unix_us = 1'764'590'000'123'456;
  exchange.response_unix_us = 1'764'590'001'500'000;
  return exchange;
}

ObservedTurn MustObserve(ExchangeObserver& observer,
                         const HttpExchange& exchange) {
  absl::StatusOr<ObservedTurn> turn = observer.Observe(exchange);
  EXPECT_TRUE(turn.ok()) << turn.status();
  return turn.ok() ? *std::move(turn) : ObservedTurn();
}

TEST(ExchangeObserverTest, AnthropicExchangeGivesSnapshotAndUsage) {
  ExchangeObserver observer({});
  const ObservedTurn turn =
      MustObserve(observer, AnthropicExchange(AnthropicBody(1), "msg_01"));
  ASSERT_TRUE(turn.snapshot.has_value());
  ASSERT_TRUE(turn.usage.has_value());
  EXPECT_TRUE(turn.usage_complete);
  const v1::Snapshot& snapshot = *turn.snapshot;
  const v1::Usage& usage = *turn.usage;
  EXPECT_EQ(snapshot.agent(), "proxy");
  EXPECT_EQ(snapshot.request_id(), "msg_01");
  EXPECT_EQ(usage.request_id(), "msg_01");
  EXPECT_EQ(snapshot.provider(), v1::PROVIDER_ANTHROPIC);
  EXPECT_EQ(usage.provider(), v1::PROVIDER_ANTHROPIC);
  EXPECT_EQ(snapshot.model(), "claude-sonnet-4-5");
  EXPECT_EQ(usage.model(), "claude-sonnet-4-5-20250929");
  EXPECT_EQ(snapshot.session_id(), usage.session_id());
  EXPECT_EQ(snapshot.lane(), usage.lane());
  EXPECT_EQ(snapshot.request_time().seconds(), 1'764'590'000);
  EXPECT_EQ(snapshot.request_time().nanos(), 123'456'000);
  EXPECT_EQ(usage.response_time().seconds(), 1'764'590'001);
  EXPECT_EQ(usage.response_time().nanos(), 500'000'000);
  EXPECT_EQ(snapshot.tool_order_policy(), v1::TOOL_ORDER_POLICY_REGISTRATION);
  EXPECT_EQ(snapshot.message_chain_size(), 3);
  EXPECT_THAT(usage.raw_usage_json(), HasSubstr("cache_read_input_tokens"));
}

TEST(ExchangeObserverTest, NoPromptTextLeavesTheObserver) {
  ExchangeObserver observer({});
  const ObservedTurn turn =
      MustObserve(observer, AnthropicExchange(AnthropicBody(2), "msg_01"));
  EXPECT_THAT(turn.snapshot->SerializeAsString(), Not(HasSubstr(kSecret)));
  EXPECT_THAT(turn.usage->SerializeAsString(), Not(HasSubstr(kSecret)));
  EXPECT_THAT(turn.note, Not(HasSubstr(kSecret)));
}

TEST(ExchangeObserverTest, LaneAgentAndSessionFromHeaders) {
  ExchangeObserver observer({});
  const ObservedTurn turn = MustObserve(
      observer, AnthropicExchange(AnthropicBody(1), "msg_01",
                                  {{"x-cachewatch-agent", "my-agent"},
                                   {"x-cachewatch-session", "s-1"},
                                   {"x-cachewatch-lane", "planner"}}));
  EXPECT_EQ(turn.snapshot->agent(), "my-agent");
  EXPECT_EQ(turn.snapshot->session_id(), "s-1");
  EXPECT_EQ(turn.snapshot->lane(), "planner");
  EXPECT_EQ(turn.usage->lane(), "planner");
}

TEST(ExchangeObserverTest, AgentFromUserAgentAndSessionFromBody) {
  ExchangeObserver observer({.default_agent = "fallback"});
  Json body = AnthropicBody(1);
  body["metadata"] = {
      {"user_id",
       "user_abc_account__session_0a1b2c3d-0000-4000-8000-000000000001"}};
  const ObservedTurn turn = MustObserve(
      observer,
      AnthropicExchange(body, "msg_1",
                        {{"user-agent", "claude-cli/2.1.90 (external, cli)"}}));
  EXPECT_EQ(turn.snapshot->agent(), "claude-code");
  EXPECT_EQ(turn.snapshot->session_id(),
            "0a1b2c3d-0000-4000-8000-000000000001");
  EXPECT_EQ(turn.snapshot->lane().rfind("inferred-", 0), 0u);

  const ObservedTurn other =
      MustObserve(observer, AnthropicExchange(AnthropicBody(1), "msg_2"));
  EXPECT_EQ(other.snapshot->agent(), "fallback");
}

TEST(ExchangeObserverTest, ConversationTurnsShareALane) {
  ExchangeObserver observer({});
  const ObservedTurn first =
      MustObserve(observer, AnthropicExchange(AnthropicBody(1), "msg_1"));
  // A subagent: another system prompt and first message.
  Json subagent = AnthropicBody(0, "You explore code.");
  const ObservedTurn sub =
      MustObserve(observer, AnthropicExchange(subagent, "msg_s"));
  const ObservedTurn second =
      MustObserve(observer, AnthropicExchange(AnthropicBody(2), "msg_2"));
  EXPECT_EQ(second.snapshot->session_id(), first.snapshot->session_id());
  EXPECT_EQ(second.snapshot->lane(), first.snapshot->lane());
  EXPECT_NE(sub.snapshot->session_id(), first.snapshot->session_id());
}

TEST(ExchangeObserverTest, CompactionSetsTheExpectedDrop) {
  ExchangeObserver observer({});
  const ObservedTurn first =
      MustObserve(observer, AnthropicExchange(AnthropicBody(3), "msg_1"));
  Json compacted = AnthropicBody(0);
  compacted["messages"] = Json::array(
      {{{"role", "user"},
        {"content",
         "This session is being continued from a previous conversation that "
         "ran out of context."}}});
  const ObservedTurn after =
      MustObserve(observer, AnthropicExchange(compacted, "msg_2"));
  EXPECT_EQ(after.snapshot->session_id(), first.snapshot->session_id());
  EXPECT_EQ(after.snapshot->expected_drop(), v1::EXPECTED_DROP_COMPACTION);
  EXPECT_EQ(first.snapshot->expected_drop(), v1::EXPECTED_DROP_UNSPECIFIED);
}

TEST(ExchangeObserverTest, UnansweredRequestsGiveNothingButANote) {
  ExchangeObserver observer({});
  HttpExchange exchange = AnthropicExchange(AnthropicBody(1), "msg_1");
  exchange.response_status = 529;
  ObservedTurn turn = MustObserve(observer, exchange);
  EXPECT_FALSE(turn.snapshot.has_value());
  EXPECT_FALSE(turn.usage.has_value());
  EXPECT_THAT(turn.note, HasSubstr("HTTP 529"));
  exchange.response_status = 0;
  turn = MustObserve(observer, exchange);
  EXPECT_THAT(turn.note, HasSubstr("no response"));
}

TEST(ExchangeObserverTest, CutStreamKeepsTheSnapshotAndSaysSo) {
  ExchangeObserver observer({});
  HttpExchange exchange = AnthropicExchange(AnthropicBody(1), "unused");
  exchange.response_headers = {{"content-type", "text/event-stream"},
                               {"request-id", "req_77"}};
  exchange.response_body = "event: ping\ndata: {}\n\nevent: message_st";
  exchange.response_complete = false;
  const ObservedTurn turn = MustObserve(observer, exchange);
  ASSERT_TRUE(turn.snapshot.has_value());
  EXPECT_FALSE(turn.usage.has_value());
  EXPECT_FALSE(turn.usage_complete);
  EXPECT_EQ(turn.snapshot->request_id(), "req_77");  // No response id.
  EXPECT_THAT(turn.note, HasSubstr("before message_start"));
}

TEST(ExchangeObserverTest, UnknownEndpointsAndBadInput) {
  ExchangeObserver observer({});
  HttpExchange exchange = AnthropicExchange(AnthropicBody(1), "msg_1");
  exchange.target = "/v1/models";
  EXPECT_EQ(observer.Observe(exchange).status().code(),
            absl::StatusCode::kNotFound);

  exchange = AnthropicExchange(AnthropicBody(1), "msg_1");
  exchange.request_body = "{\"model\": \"m\", \"messages\": [";
  absl::StatusOr<ObservedTurn> bad = observer.Observe(exchange);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("malformed JSON"));

  for (const std::string& value :
       {std::string(), std::string(300, 'x'), std::string("bad\x01value")}) {
    exchange = AnthropicExchange(AnthropicBody(1), "msg_1",
                                 {{"x-cachewatch-session", value}});
    absl::StatusOr<ObservedTurn> header = observer.Observe(exchange);
    EXPECT_EQ(header.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(header.status().message(), HasSubstr("x-cachewatch-session"));
  }
  // The daemon's limits: lanes and agents 128 bytes, sessions 256.
  exchange =
      AnthropicExchange(AnthropicBody(1), "msg_1",
                        {{"x-cachewatch-lane", std::string(129, 'l')},
                         {"x-cachewatch-session", std::string(256, 's')}});
  EXPECT_THAT(observer.Observe(exchange).status().message(),
              HasSubstr("x-cachewatch-lane must be 1..128"));
}

TEST(ExchangeObserverTest, OpenAiCompatibleProviderFromTheUpstreamHost) {
  ExchangeObserver observer({});
  HttpExchange exchange;
  exchange.method = "POST";
  exchange.target = "/chat/completions";
  exchange.upstream_host = "api.deepseek.com";
  exchange.request_body =
      Json{{"model", "deepseek-chat"},
           {"messages", Json::array({{{"role", "user"}, {"content", "hi"}}})}}
          .dump();
  exchange.response_status = 200;
  exchange.response_headers = {{"content-type", "application/json"}};
  exchange.response_body =
      R"({"id":"chatcmpl-d","usage":{"prompt_tokens":10,"completion_tokens":1,"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":10}})";
  exchange.response_complete = true;
  const ObservedTurn turn = MustObserve(observer, exchange);
  EXPECT_EQ(turn.snapshot->provider(), v1::PROVIDER_DEEPSEEK);
  EXPECT_EQ(turn.usage->provider(), v1::PROVIDER_DEEPSEEK);
  EXPECT_EQ(turn.usage->request_id(), "chatcmpl-d");
}

TEST(ExchangeObserverTest, AnthropicDiagnosticsRequest) {
  ExchangeObserver observer({});
  const std::string first = AnthropicBody(1).dump();
  // The lane's first turn opts in with null, the rest of the body unchanged.
  std::optional<std::string> opted =
      observer.WithDiagnosticsRequest("/v1/messages", {}, first);
  ASSERT_TRUE(opted.has_value());
  EXPECT_EQ(*opted, "{\"diagnostics\":{\"previous_message_id\":null}," +
                        first.substr(1));
  HttpExchange exchange = AnthropicExchange(AnthropicBody(1), "msg_01");
  exchange.request_body = *opted;
  MustObserve(observer, exchange);

  const std::string second = AnthropicBody(2).dump();
  opted = observer.WithDiagnosticsRequest("/v1/messages?beta=true", {}, second);
  ASSERT_TRUE(opted.has_value());
  const Json sent = Json::parse(*opted);
  EXPECT_EQ(sent["diagnostics"]["previous_message_id"], "msg_01");
  Json without = sent;
  without.erase("diagnostics");
  EXPECT_EQ(without, Json::parse(second));

  // Not applicable: the field is there already, a bad body, another API.
  Json has_field = AnthropicBody(2);
  has_field["diagnostics"] = {{"previous_message_id", nullptr}};
  EXPECT_FALSE(
      observer.WithDiagnosticsRequest("/v1/messages", {}, has_field.dump()));
  EXPECT_FALSE(observer.WithDiagnosticsRequest("/v1/messages", {}, "{bad"));
  EXPECT_FALSE(observer.WithDiagnosticsRequest("/v1/models", {}, second));
  EXPECT_FALSE(observer.WithDiagnosticsRequest(
      "/v1/chat/completions", {},
      R"({"model":"gpt-5.6","messages":[{"role":"user","content":"x"}]})"));
}

TEST(ExchangeObserverTest, OpenAiResponsesDiagnosticsRequest) {
  ExchangeObserver observer({});
  const auto body = [](const char* model, const char* text) {
    return Json{
        {"model", model},
        {"instructions", "Be brief."},
        {"input", Json::array({{{"role", "user"}, {"content", text}}})}};
  };
  // No previous response yet: unchanged.
  EXPECT_FALSE(observer.WithDiagnosticsRequest("/v1/responses", {},
                                               body("gpt-5.6", "one").dump()));
  HttpExchange exchange;
  exchange.method = "POST";
  exchange.target = "/v1/responses";
  exchange.request_body = body("gpt-5.6", "one").dump();
  exchange.response_status = 200;
  exchange.response_headers = {{"content-type", "application/json"}};
  exchange.response_body =
      R"({"id":"resp_A","usage":{"input_tokens":5,"output_tokens":1}})";
  exchange.response_complete = true;
  MustObserve(observer, exchange);

  Json next = body("gpt-5.6", "one");
  next["input"].push_back({{"role", "assistant"}, {"content", "ok"}});
  std::optional<std::string> opted =
      observer.WithDiagnosticsRequest("/v1/responses", {}, next.dump());
  ASSERT_TRUE(opted.has_value());
  EXPECT_EQ(
      Json::parse(*opted)["prompt_cache_options"]["comparison_response_id"],
      "resp_A");

  // Models before GPT-5.6 do not take the field.
  for (const char* model : {"gpt-5", "gpt-5.5-mini", "gpt-4o", "o3"}) {
    Json old = next;
    old["model"] = model;
    EXPECT_FALSE(
        observer.WithDiagnosticsRequest("/v1/responses", {}, old.dump()))
        << model;
  }
  for (const char* model : {"gpt-5.6-mini", "gpt-6-astra", "gpt-5.10"}) {
    Json newer = next;
    newer["model"] = model;
    // Another model is still the same lane (its chain extends the last).
    EXPECT_TRUE(
        observer.WithDiagnosticsRequest("/v1/responses", {}, newer.dump()))
        << model;
  }
}

TEST(ExchangeObserverTest, ConcurrentObservesAreSafe) {
  ExchangeObserver observer({.max_inferred_lanes = 8});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&observer, t] {
      for (int i = 0; i < 50; ++i) {
        HttpExchange exchange = AnthropicExchange(
            AnthropicBody(i % 5, "agent " + std::to_string(t)),
            "msg_" + std::to_string(t) + "_" + std::to_string(i));
        EXPECT_TRUE(observer.Observe(exchange).ok());
        observer.WithDiagnosticsRequest("/v1/messages", {},
                                        exchange.request_body);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
}

}  // namespace
}  // namespace cachewatch
