#include "daemon/receiver/proxy/observed_usage.h"

#include <string>

#include "daemon/core/usage_normalizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace cachewatch {
namespace {

using Json = nlohmann::json;
using ::testing::HasSubstr;

constexpr size_t kLimit = size_t{32} << 20;
const HttpHeaders kJson = {{"content-type", "application/json"}};
const HttpHeaders kStream = {
    {"content-type", "text/event-stream; charset=utf-8"}};

ObservedUsage Read(ProxyApi api, const HttpHeaders& headers,
                   std::string_view body, bool include_usage = true,
                   bool complete = true, int status = 200) {
  return ReadObservedUsage(api, include_usage, status, headers, body, complete,
                           kLimit);
}

// The raw usage normalizes as the daemon will read it.
v1::NormalizedUsage Normalized(v1::Provider provider,
                               const ObservedUsage& usage) {
  absl::StatusOr<v1::NormalizedUsage> normalized =
      NormalizeRawUsage(provider, usage.raw_usage_json);
  EXPECT_TRUE(normalized.ok())
      << normalized.status() << " " << usage.raw_usage_json;
  return normalized.value_or(v1::NormalizedUsage());
}

TEST(ObservedUsageTest, AnthropicJson) {
  const std::string body =
      R"({"id":"msg_01","type":"message","model":"claude-sonnet-4-5",
    "content":[{"type":"text","text":"secret answer"}],
    "usage":{"input_tokens":10,"cache_read_input_tokens":900,
             "cache_creation_input_tokens":100,
             "cache_creation":{"ephemeral_5m_input_tokens":100,"ephemeral_1h_input_tokens":0},
             "output_tokens":42},
    "diagnostics":{"cache_miss_reason":{"type":"tools_changed","cache_missed_input_tokens":1200}}})";
  const ObservedUsage usage = Read(ProxyApi::kAnthropicMessages, kJson, body);
  EXPECT_EQ(usage.response_id, "msg_01");
  EXPECT_EQ(usage.model, "claude-sonnet-4-5");
  EXPECT_TRUE(usage.complete);
  EXPECT_TRUE(usage.note.empty());
  EXPECT_THAT(usage.raw_usage_json, testing::Not(HasSubstr("secret")));
  const Json raw = Json::parse(usage.raw_usage_json);
  EXPECT_EQ(raw["diagnostics"]["cache_miss_reason"]["type"], "tools_changed");
  ASSERT_TRUE(usage.diagnostics.has_value());
  EXPECT_EQ(usage.diagnostics->cache_miss_reason(), "tools_changed");
  EXPECT_EQ(usage.diagnostics->cache_missed_input_tokens(), 1200);
  const v1::NormalizedUsage counts = Normalized(v1::PROVIDER_ANTHROPIC, usage);
  EXPECT_EQ(counts.cache_read_tokens(), 900);
  EXPECT_EQ(counts.cache_write_tokens(), 100);
  EXPECT_EQ(counts.output_tokens(), 42);
}

TEST(ObservedUsageTest, AnthropicNullMissReasonIsCarriedButNotAReason) {
  const ObservedUsage usage = Read(
      ProxyApi::kAnthropicMessages, kJson,
      R"({"id":"msg_2","usage":{"input_tokens":1},"diagnostics":{"cache_miss_reason":null}})");
  EXPECT_THAT(usage.raw_usage_json, HasSubstr("\"diagnostics\""));
  EXPECT_FALSE(usage.diagnostics.has_value());
}

constexpr std::string_view kAnthropicStream =
    "event: message_start\r\n"
    "data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_s\",\"model\":"
    "\"claude-opus-4-5\",\"usage\":{\"input_tokens\":5,\"cache_read_input_"
    "tokens\":800,\"cache_creation_input_tokens\":0,\"output_tokens\":1},"
    "\"diagnostics\":{\"cache_miss_reason\":{\"type\":\"messages_changed\","
    "\"cache_missed_input_tokens\":30}}}}\r\n\r\n"
    ": keep-alive\r\n\r\n"
    "event: ping\r\ndata: {\"type\": \"ping\"}\r\n\r\n"
    "event: content_block_delta\r\n"
    "data: {\"type\":\"content_block_delta\",\"index\":0,\r\n"
    "data: \"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\r\n\r\n";
constexpr std::string_view kAnthropicStreamEnd =
    "event: message_delta\r\n"
    "data: "
    "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},"
    "\"usage\":{\"output_tokens\":77,\"cache_read_input_tokens\":null}}\r\n\r\n"
    "event: message_stop\r\ndata: {\"type\":\"message_stop\"}\r\n\r\n";

TEST(ObservedUsageTest, AnthropicStreamMergesMessageStartAndDelta) {
  const std::string stream =
      std::string(kAnthropicStream) + std::string(kAnthropicStreamEnd);
  const ObservedUsage usage =
      Read(ProxyApi::kAnthropicMessages, kStream, stream);
  EXPECT_EQ(usage.response_id, "msg_s");
  EXPECT_EQ(usage.model, "claude-opus-4-5");
  EXPECT_TRUE(usage.complete) << usage.note;
  const v1::NormalizedUsage counts = Normalized(v1::PROVIDER_ANTHROPIC, usage);
  EXPECT_EQ(counts.cache_read_tokens(), 800);  // null in the delta: kept.
  EXPECT_EQ(counts.output_tokens(), 77);
  ASSERT_TRUE(usage.diagnostics.has_value());
  EXPECT_EQ(usage.diagnostics->cache_miss_reason(), "messages_changed");
}

TEST(ObservedUsageTest, AnthropicStreamWithoutEventLines) {
  std::string stream;
  for (std::string_view part : {kAnthropicStream, kAnthropicStreamEnd}) {
    std::string text(part);
    size_t at;
    while ((at = text.find("event: ")) != std::string::npos) {
      text.erase(at, text.find("\r\n", at) + 2 - at);
    }
    stream += text;
  }
  const ObservedUsage usage =
      Read(ProxyApi::kAnthropicMessages, kStream, stream);
  EXPECT_TRUE(usage.complete) << usage.note;
  EXPECT_EQ(Normalized(v1::PROVIDER_ANTHROPIC, usage).output_tokens(), 77);
}

TEST(ObservedUsageTest, AnthropicCutStreams) {
  // Cut after message_start: the cache counts are there, not final output.
  const ObservedUsage partial = Read(ProxyApi::kAnthropicMessages, kStream,
                                     kAnthropicStream, true, false);
  EXPECT_FALSE(partial.complete);
  EXPECT_THAT(partial.note, HasSubstr("before message_delta"));
  EXPECT_EQ(Normalized(v1::PROVIDER_ANTHROPIC, partial).cache_read_tokens(),
            800);
  // Cut inside message_start: nothing.
  const ObservedUsage none = Read(ProxyApi::kAnthropicMessages, kStream,
                                  kAnthropicStream.substr(0, 60), true, false);
  EXPECT_TRUE(none.raw_usage_json.empty());
  EXPECT_THAT(none.note, HasSubstr("before message_start"));
  // An error event.
  const ObservedUsage error =
      Read(ProxyApi::kAnthropicMessages, kStream,
           std::string(kAnthropicStream) +
               "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":"
               "\"overloaded_error\"}}\n\n");
  EXPECT_FALSE(error.complete);
  EXPECT_THAT(error.note, HasSubstr("overloaded_error"));
}

constexpr std::string_view kChatStream =
    "data: {\"id\":\"chatcmpl-1\",\"model\":\"gpt-5\",\"choices\":[{\"delta\":"
    "{\"content\":\"hi\"}}],\"usage\":null}\n\n"
    "data: {\"id\":\"chatcmpl-1\",\"model\":\"gpt-5\",\"choices\":[],"
    "\"usage\":{\"prompt_tokens\":2000,\"completion_tokens\":9,"
    "\"prompt_tokens_details\":{\"cached_tokens\":1920}}}\n\n"
    "data: [DONE]\n\n";

TEST(ObservedUsageTest, OpenAiChatJsonAndStream) {
  const ObservedUsage json = Read(
      ProxyApi::kOpenAiChat, kJson,
      R"({"id":"chatcmpl-9","model":"gpt-5-2025","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":0}}})");
  EXPECT_EQ(json.response_id, "chatcmpl-9");
  EXPECT_TRUE(json.complete);
  EXPECT_EQ(Normalized(v1::PROVIDER_OPENAI, json).uncached_input_tokens(), 10);

  const ObservedUsage stream =
      Read(ProxyApi::kOpenAiChat, kStream, kChatStream);
  EXPECT_EQ(stream.response_id, "chatcmpl-1");
  EXPECT_EQ(stream.model, "gpt-5");
  EXPECT_TRUE(stream.complete);
  EXPECT_EQ(Normalized(v1::PROVIDER_OPENAI, stream).cache_read_tokens(), 1920);
}

TEST(ObservedUsageTest, OpenAiChatStreamWithoutUsage) {
  const std::string first(kChatStream.substr(0, kChatStream.find("\n\n") + 2));
  const ObservedUsage not_asked =
      Read(ProxyApi::kOpenAiChat, kStream, first + "data: [DONE]\n\n", false);
  EXPECT_TRUE(not_asked.raw_usage_json.empty());
  EXPECT_EQ(not_asked.response_id, "chatcmpl-1");
  EXPECT_THAT(not_asked.note, HasSubstr("include_usage"));
  const ObservedUsage cut =
      Read(ProxyApi::kOpenAiChat, kStream, first, true, false);
  EXPECT_THAT(cut.note, HasSubstr("ended before its usage chunk"));
}

TEST(ObservedUsageTest, DeepSeekChatUsageIsCarriedVerbatim) {
  const ObservedUsage usage = Read(
      ProxyApi::kOpenAiChat, kJson,
      R"({"id":"x","usage":{"prompt_tokens":100,"completion_tokens":1,"prompt_cache_hit_tokens":64,"prompt_cache_miss_tokens":36}})");
  EXPECT_EQ(Normalized(v1::PROVIDER_DEEPSEEK, usage).cache_read_tokens(), 64);
}

constexpr std::string_view kResponsesStream =
    "event: response.created\n"
    "data: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\","
    "\"model\":\"gpt-5.6\",\"usage\":null}}\n\n"
    "event: response.output_text.delta\n"
    "data: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n";
constexpr std::string_view kResponsesStreamEnd =
    "event: response.completed\n"
    "data: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\","
    "\"model\":\"gpt-5.6\",\"usage\":{\"input_tokens\":3000,\"output_tokens\":"
    "5,\"input_tokens_details\":{\"cached_tokens\":2048}},"
    "\"prompt_cache_diagnostics\":{\"type\":\"cache_miss\",\"reason\":"
    "\"tools_changed\",\"cache_missed_tokens\":900}}}\n\n";

TEST(ObservedUsageTest, ResponsesJsonAndStream) {
  const ObservedUsage json = Read(
      ProxyApi::kOpenAiResponses, kJson,
      R"({"id":"resp_9","object":"response","model":"gpt-5.6","usage":{"input_tokens":10,"output_tokens":1,"input_tokens_details":{"cached_tokens":0}},"prompt_cache_diagnostics":{"type":"cache_hit"}})");
  EXPECT_EQ(json.response_id, "resp_9");
  EXPECT_THAT(json.raw_usage_json, HasSubstr("prompt_cache_diagnostics"));
  EXPECT_FALSE(json.diagnostics.has_value());  // A hit is no miss reason.

  const ObservedUsage stream =
      Read(ProxyApi::kOpenAiResponses, kStream,
           std::string(kResponsesStream) + std::string(kResponsesStreamEnd));
  EXPECT_EQ(stream.response_id, "resp_1");
  EXPECT_TRUE(stream.complete);
  EXPECT_EQ(Normalized(v1::PROVIDER_OPENAI, stream).cache_read_tokens(), 2048);
  ASSERT_TRUE(stream.diagnostics.has_value());
  EXPECT_EQ(stream.diagnostics->cache_miss_reason(), "tools_changed");
  EXPECT_EQ(stream.diagnostics->cache_missed_input_tokens(), 900);

  const ObservedUsage cut =
      Read(ProxyApi::kOpenAiResponses, kStream, kResponsesStream, true, false);
  EXPECT_TRUE(cut.raw_usage_json.empty());
  EXPECT_EQ(cut.response_id, "resp_1");
  EXPECT_THAT(cut.note, HasSubstr("before response.completed"));
}

TEST(ObservedUsageTest, OpenAiDiagnosticOutcomesOtherThanHit) {
  const ObservedUsage usage = Read(
      ProxyApi::kOpenAiResponses, kJson,
      R"({"id":"r","usage":{"input_tokens":1},"prompt_cache_diagnostics":{"type":"comparison_response_not_found"}})");
  ASSERT_TRUE(usage.diagnostics.has_value());
  EXPECT_EQ(usage.diagnostics->cache_miss_reason(),
            "comparison_response_not_found");
}

TEST(ObservedUsageTest, ErrorsAndBadBodiesGiveNoUsageAndSayWhy) {
  const struct {
    int status;
    std::string body;
    bool complete;
    std::string note;
  } kCases[] = {
      {0, "", false, "no response"},
      {429, R"({"type":"error"})", true, "HTTP 429"},
      {200, "not json", true, "not a JSON object"},
      {200, R"({"id":"msg_1","usa)", false, "cut short"},
      {200, R"({"id":"msg_1"})", true, "no usage"},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.body);
    const ObservedUsage usage = Read(ProxyApi::kAnthropicMessages, kJson,
                                     c.body, true, c.complete, c.status);
    EXPECT_TRUE(usage.raw_usage_json.empty());
    EXPECT_FALSE(usage.complete);
    EXPECT_THAT(usage.note, HasSubstr(c.note));
  }
  const ObservedUsage big =
      ReadObservedUsage(ProxyApi::kAnthropicMessages, true, 200, kJson,
                        R"({"usage":{"input_tokens":1}})", true, 10);
  EXPECT_THAT(big.note, HasSubstr("more than the 10 observed"));
}

}  // namespace
}  // namespace cachewatch
