#include "daemon/core/usage_normalizer.h"

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cachewatch/v1/snapshot.pb.h"
#include "cachewatch/v1/usage.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cachewatch {
namespace {

using ::testing::HasSubstr;

// A raw usage object and the canonical counts it must normalize to.
// prompt_total is spelled out rather than derived, so that a rule read the
// wrong way round (an inclusive total taken as exclusive) fails here.
struct NormalizeCase {
  const char* name;
  v1::Provider provider;
  const char* json;
  int64_t uncached;
  int64_t read;
  int64_t write;
  int64_t write_5m;
  int64_t write_1h;
  int64_t output;
  int64_t prompt_total;
};

const NormalizeCase kNormalizeCases[] = {
    // Anthropic Messages: input_tokens excludes cache reads and writes.
    {"anthropic_1h_write", v1::PROVIDER_ANTHROPIC,
     R"({"input_tokens":50,"cache_creation_input_tokens":1000,
         "cache_read_input_tokens":20000,
         "cache_creation":{"ephemeral_5m_input_tokens":0,
                           "ephemeral_1h_input_tokens":1000},
         "output_tokens":300})",
     50, 20000, 1000, 0, 1000, 300, 21050},
    {"anthropic_whole_response", v1::PROVIDER_ANTHROPIC,
     R"({"id":"msg_01","type":"message","role":"assistant",
         "model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hi"}],
         "stop_reason":"end_turn",
         "usage":{"input_tokens":3,"cache_creation_input_tokens":2051,
                  "cache_read_input_tokens":0,
                  "cache_creation":{"ephemeral_5m_input_tokens":2051,
                                    "ephemeral_1h_input_tokens":0},
                  "output_tokens":12,"service_tier":"standard"}})",
     3, 0, 2051, 2051, 0, 12, 2054},
    {"anthropic_web_search_split_zero", v1::PROVIDER_ANTHROPIC,
     R"({"input_tokens":420,"cache_creation_input_tokens":1500,
         "cache_read_input_tokens":9000,
         "cache_creation":{"ephemeral_5m_input_tokens":0,
                           "ephemeral_1h_input_tokens":0},
         "output_tokens":250,"server_tool_use":{"web_search_requests":1}})",
     420, 9000, 1500, 0, 0, 250, 10920},
    {"anthropic_split_without_total", v1::PROVIDER_ANTHROPIC,
     R"({"input_tokens":10,"cache_read_input_tokens":700,
         "cache_creation":{"ephemeral_5m_input_tokens":300,
                           "ephemeral_1h_input_tokens":200},
         "output_tokens":5})",
     10, 700, 500, 300, 200, 5, 1210},
    {"anthropic_no_cache_fields", v1::PROVIDER_ANTHROPIC,
     R"({"input_tokens":1200,"output_tokens":40})", 1200, 0, 0, 0, 0, 40, 1200},
    {"anthropic_null_cache_fields", v1::PROVIDER_ANTHROPIC,
     R"({"input_tokens":900,"cache_creation_input_tokens":null,
         "cache_read_input_tokens":null,"cache_creation":null,
         "output_tokens":7})",
     900, 0, 0, 0, 0, 7, 900},

    // Bedrock Converse: inputTokens excludes cache reads and writes.
    {"bedrock_cache_details", v1::PROVIDER_BEDROCK,
     R"({"inputTokens":120,"outputTokens":85,"totalTokens":5405,
         "cacheReadInputTokens":4000,"cacheWriteInputTokens":1200,
         "cacheDetails":[{"ttl":"1h","inputTokens":1000},
                         {"ttl":"5m","inputTokens":200}]})",
     120, 4000, 1200, 200, 1000, 85, 5320},
    {"bedrock_whole_response", v1::PROVIDER_BEDROCK,
     R"({"output":{"message":{"role":"assistant",
                              "content":[{"text":"Done."}]}},
         "stopReason":"end_turn",
         "usage":{"inputTokens":18,"outputTokens":4,"totalTokens":3022,
                  "cacheReadInputTokens":3000,"cacheWriteInputTokens":0},
         "metrics":{"latencyMs":812}})",
     18, 3000, 0, 0, 0, 4, 3018},
    {"bedrock_write_without_details", v1::PROVIDER_BEDROCK,
     R"({"inputTokens":60,"outputTokens":30,"cacheReadInputTokens":0,
         "cacheWriteInputTokens":2500})",
     60, 0, 2500, 0, 0, 30, 2560},
    {"bedrock_no_cache_fields", v1::PROVIDER_BEDROCK,
     R"({"inputTokens":30,"outputTokens":10,"totalTokens":40})", 30, 0, 0, 0, 0,
     10, 30},

    // OpenAI Chat Completions: prompt_tokens includes cached_tokens.
    {"openai_chat_cached", v1::PROVIDER_OPENAI,
     R"({"prompt_tokens":2006,"completion_tokens":300,"total_tokens":2306,
         "prompt_tokens_details":{"cached_tokens":1920}})",
     86, 1920, 0, 0, 0, 300, 2006},
    {"openai_chat_whole_response", v1::PROVIDER_OPENAI,
     R"({"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o",
         "choices":[{"index":0,"message":{"role":"assistant","content":"ok"},
                     "finish_reason":"stop"}],
         "usage":{"prompt_tokens":1536,"completion_tokens":20,
                  "total_tokens":1556,
                  "prompt_tokens_details":{"cached_tokens":1408,
                                           "audio_tokens":0},
                  "completion_tokens_details":{"reasoning_tokens":0}}})",
     128, 1408, 0, 0, 0, 20, 1536},
    {"openai_chat_null_details", v1::PROVIDER_OPENAI,
     R"({"prompt_tokens":700,"completion_tokens":9,"total_tokens":709,
         "prompt_tokens_details":null})",
     700, 0, 0, 0, 0, 9, 700},

    // OpenAI Responses: input_tokens includes cached (and Azure's writes).
    {"openai_responses_cached", v1::PROVIDER_OPENAI,
     R"({"input_tokens":5000,"input_tokens_details":{"cached_tokens":4864},
         "output_tokens":900,
         "output_tokens_details":{"reasoning_tokens":640},
         "total_tokens":5900})",
     136, 4864, 0, 0, 0, 900, 5000},
    {"openai_responses_azure_cache_write", v1::PROVIDER_OPENAI,
     R"({"input_tokens":3000,
         "input_tokens_details":{"cached_tokens":1024,
                                 "cache_write_tokens":1500},
         "output_tokens":20,"total_tokens":3020})",
     476, 1024, 1500, 0, 0, 20, 3000},

    // Gemini: promptTokenCount includes cachedContentTokenCount; thoughts
    // are output.
    {"gemini_bare", v1::PROVIDER_GEMINI,
     R"({"promptTokenCount":12000,"cachedContentTokenCount":8000,
         "candidatesTokenCount":50})",
     4000, 8000, 0, 0, 0, 50, 12000},
    {"gemini_usage_metadata_with_thoughts", v1::PROVIDER_GEMINI,
     R"({"candidates":[{"content":{"parts":[{"text":"ok"}],"role":"model"}}],
         "usageMetadata":{"promptTokenCount":20480,
                          "cachedContentTokenCount":16384,
                          "candidatesTokenCount":210,
                          "thoughtsTokenCount":1200,
                          "totalTokenCount":21890},
         "modelVersion":"gemini-2.5-flash"})",
     4096, 16384, 0, 0, 0, 1410, 20480},
    {"gemini_snake_case", v1::PROVIDER_GEMINI,
     R"({"usage_metadata":{"prompt_token_count":3000,
                           "cached_content_token_count":2048,
                           "candidates_token_count":100,
                           "thoughts_token_count":25}})",
     952, 2048, 0, 0, 0, 125, 3000},
    {"gemini_no_cache", v1::PROVIDER_GEMINI,
     R"({"promptTokenCount":800,"candidatesTokenCount":60,
         "totalTokenCount":860})",
     800, 0, 0, 0, 0, 60, 800},

    // DashScope: prompt_tokens includes cached tokens and cache creation.
    {"dashscope_explicit_cache_creation", v1::PROVIDER_DASHSCOPE,
     R"({"prompt_tokens":3019,"completion_tokens":104,"total_tokens":3123,
         "prompt_tokens_details":{"cached_tokens":0,
                                  "cache_creation_input_tokens":2048,
                                  "cache_creation":
                                      {"ephemeral_5m_input_tokens":2048},
                                  "cache_type":"ephemeral"}})",
     971, 0, 2048, 2048, 0, 104, 3019},
    {"dashscope_cache_hit", v1::PROVIDER_DASHSCOPE,
     R"({"prompt_tokens":3019,"completion_tokens":80,"total_tokens":3099,
         "prompt_tokens_details":{"cached_tokens":2048}})",
     971, 2048, 0, 0, 0, 80, 3019},
    {"dashscope_read_and_write", v1::PROVIDER_DASHSCOPE,
     R"({"usage":{"prompt_tokens":5000,"completion_tokens":10,
                  "prompt_tokens_details":{
                      "cached_tokens":2048,
                      "cache_creation_input_tokens":2500}}})",
     452, 2048, 2500, 0, 0, 10, 5000},

    // DeepSeek: prompt_tokens = hit + miss.
    {"deepseek_hit_and_miss", v1::PROVIDER_DEEPSEEK,
     R"({"prompt_tokens":1500,"completion_tokens":200,"total_tokens":1700,
         "prompt_cache_hit_tokens":1280,"prompt_cache_miss_tokens":220})",
     220, 1280, 0, 0, 0, 200, 1500},
    {"deepseek_prompt_and_hit_only", v1::PROVIDER_DEEPSEEK,
     R"({"prompt_tokens":900,"prompt_cache_hit_tokens":640,
         "completion_tokens":15})",
     260, 640, 0, 0, 0, 15, 900},
    {"deepseek_cold_whole_response", v1::PROVIDER_DEEPSEEK,
     R"({"id":"d1","model":"deepseek-reasoner",
         "usage":{"prompt_tokens":1500,"completion_tokens":400,
                  "prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":1500,
                  "completion_tokens_details":{"reasoning_tokens":350}}})",
     1500, 0, 0, 0, 0, 400, 1500},

    // Kimi: OpenAI-compatible (inclusive) or Anthropic-compatible (exclusive).
    {"kimi_top_level_cached_tokens", v1::PROVIDER_KIMI,
     R"({"prompt_tokens":8000,"completion_tokens":120,"total_tokens":8120,
         "cached_tokens":7680})",
     320, 7680, 0, 0, 0, 120, 8000},
    {"kimi_prompt_tokens_details", v1::PROVIDER_KIMI,
     R"({"prompt_tokens":8000,"completion_tokens":120,
         "prompt_tokens_details":{"cached_tokens":7936}})",
     64, 7936, 0, 0, 0, 120, 8000},
    {"kimi_anthropic_style", v1::PROVIDER_KIMI,
     R"({"usage":{"input_tokens":256,"cache_read_input_tokens":7680,
                  "cache_creation_input_tokens":0,"output_tokens":120}})",
     256, 7680, 0, 0, 0, 120, 7936},
};

TEST(UsageNormalizerTest, NormalizesDocumentedExamples) {
  for (const NormalizeCase& c : kNormalizeCases) {
    SCOPED_TRACE(c.name);
    const absl::StatusOr<v1::NormalizedUsage> usage =
        NormalizeRawUsage(c.provider, c.json);
    ASSERT_TRUE(usage.ok()) << usage.status();
    EXPECT_EQ(usage->uncached_input_tokens(), c.uncached);
    EXPECT_EQ(usage->cache_read_tokens(), c.read);
    EXPECT_EQ(usage->cache_write_tokens(), c.write);
    EXPECT_EQ(usage->cache_write_5m_tokens(), c.write_5m);
    EXPECT_EQ(usage->cache_write_1h_tokens(), c.write_1h);
    EXPECT_EQ(usage->output_tokens(), c.output);
    EXPECT_EQ(PromptTotalTokens(*usage), c.prompt_total);
    EXPECT_TRUE(ValidateNormalizedUsage(*usage).ok());
  }
}

// A raw usage that must be rejected, and what the message must name.
struct RejectCase {
  const char* name;
  v1::Provider provider;
  const char* json;
  const char* field;        // Named in the message.
  const char* other_field;  // Also named, or nullptr.
};

const RejectCase kRejectCases[] = {
    // Input and provider.
    {"unspecified_provider", v1::PROVIDER_UNSPECIFIED, R"({"input_tokens":1})",
     "provider 0 (PROVIDER_UNSPECIFIED)", nullptr},
    {"unknown_provider", static_cast<v1::Provider>(42), R"({"input_tokens":1})",
     "provider 42", nullptr},
    {"malformed_json", v1::PROVIDER_ANTHROPIC, R"({"input_tokens": 5,})",
     "malformed JSON at byte 20", nullptr},
    {"empty_input", v1::PROVIDER_OPENAI, "", "malformed JSON at byte 1",
     nullptr},
    {"trailing_garbage", v1::PROVIDER_GEMINI, R"({"promptTokenCount":1} x)",
     "malformed JSON at byte", nullptr},
    {"float_overflow", v1::PROVIDER_ANTHROPIC, R"({"input_tokens":1e400})",
     "malformed JSON at byte", nullptr},
    {"array_not_object", v1::PROVIDER_ANTHROPIC, "[1,2]", "array",
     "not an object"},
    {"number_not_object", v1::PROVIDER_DEEPSEEK, "42", "number",
     "not an object"},

    // Count values.
    {"anthropic_missing_input_tokens", v1::PROVIDER_ANTHROPIC,
     R"({"output_tokens":5})", "anthropic usage needs input_tokens", nullptr},
    {"anthropic_null_input_tokens", v1::PROVIDER_ANTHROPIC,
     R"({"input_tokens":null,"output_tokens":5})",
     "anthropic usage needs input_tokens", nullptr},
    {"negative_count", v1::PROVIDER_ANTHROPIC,
     R"({"input_tokens":5,"cache_read_input_tokens":-1})",
     "cache_read_input_tokens", "negative"},
    {"float_count", v1::PROVIDER_ANTHROPIC, R"({"input_tokens":12.5})",
     "input_tokens", "not an integer"},
    {"integral_float_count", v1::PROVIDER_ANTHROPIC, R"({"input_tokens":12.0})",
     "input_tokens", "not an integer"},
    {"exponent_count", v1::PROVIDER_ANTHROPIC, R"({"input_tokens":1e3})",
     "input_tokens", "not an integer"},
    {"string_count", v1::PROVIDER_ANTHROPIC, R"({"input_tokens":"100"})",
     "input_tokens", "not an integer"},
    {"bool_count", v1::PROVIDER_ANTHROPIC,
     R"({"input_tokens":1,"output_tokens":true})", "output_tokens",
     "not an integer"},
    {"count_above_1e12", v1::PROVIDER_ANTHROPIC,
     R"({"input_tokens":1000000000001})", "input_tokens", "exceeds"},
    {"count_beyond_uint64", v1::PROVIDER_ANTHROPIC,
     R"({"input_tokens":100000000000000000000})", "input_tokens",
     "not an integer"},
    {"nested_count_bad", v1::PROVIDER_OPENAI,
     R"({"prompt_tokens":10,"prompt_tokens_details":{"cached_tokens":2.5}})",
     "prompt_tokens_details.cached_tokens", "not an integer"},
    {"parent_not_object", v1::PROVIDER_ANTHROPIC,
     R"({"input_tokens":5,"cache_creation":5})", "cache_creation",
     "not an object"},

    // Anthropic.
    {"anthropic_split_exceeds_creation", v1::PROVIDER_ANTHROPIC,
     R"({"input_tokens":5,"cache_creation_input_tokens":1000,
         "cache_creation":{"ephemeral_5m_input_tokens":600,
                           "ephemeral_1h_input_tokens":600}})",
     "cache_creation_input_tokens (1000)",
     "cache_creation.ephemeral_5m_input_tokens + "
     "cache_creation.ephemeral_1h_input_tokens (1200)"},
    {"anthropic_openai_shape", v1::PROVIDER_ANTHROPIC,
     R"({"prompt_tokens":2006,"completion_tokens":300})",
     "anthropic usage needs input_tokens", nullptr},

    // Bedrock.
    {"bedrock_missing_input_tokens", v1::PROVIDER_BEDROCK,
     R"({"outputTokens":5,"cacheReadInputTokens":10})",
     "bedrock usage needs inputTokens", nullptr},
    {"bedrock_details_not_array", v1::PROVIDER_BEDROCK,
     R"({"inputTokens":5,"cacheDetails":{"ttl":"5m","inputTokens":3}})",
     "cacheDetails", "not an array"},
    {"bedrock_details_entry_not_object", v1::PROVIDER_BEDROCK,
     R"({"inputTokens":5,"cacheDetails":[3]})", "cacheDetails[0]",
     "not an object"},
    {"bedrock_details_missing_tokens", v1::PROVIDER_BEDROCK,
     R"({"inputTokens":5,"cacheDetails":[{"ttl":"5m"}]})",
     "bedrock usage needs cacheDetails[0].inputTokens", nullptr},
    {"bedrock_details_negative", v1::PROVIDER_BEDROCK,
     R"({"inputTokens":5,"cacheWriteInputTokens":10,
         "cacheDetails":[{"ttl":"1h","inputTokens":10},
                         {"ttl":"5m","inputTokens":-3}]})",
     "cacheDetails[1].inputTokens", "negative"},
    {"bedrock_details_exceed_write", v1::PROVIDER_BEDROCK,
     R"({"inputTokens":5,"cacheWriteInputTokens":100,
         "cacheDetails":[{"ttl":"1h","inputTokens":80},
                         {"ttl":"5m","inputTokens":40}]})",
     "cacheWriteInputTokens (100)", "cacheDetails[].inputTokens (120)"},

    // OpenAI.
    {"openai_no_prompt_field", v1::PROVIDER_OPENAI,
     R"({"completion_tokens":5,"total_tokens":5})",
     "openai usage needs prompt_tokens", "input_tokens"},
    {"openai_chat_cached_exceeds_prompt", v1::PROVIDER_OPENAI,
     R"({"prompt_tokens":100,"completion_tokens":1,
         "prompt_tokens_details":{"cached_tokens":200}})",
     "prompt_tokens (100)", "prompt_tokens_details.cached_tokens (200)"},
    {"openai_responses_parts_exceed_input", v1::PROVIDER_OPENAI,
     R"({"input_tokens":1000,"output_tokens":1,
         "input_tokens_details":{"cached_tokens":600,
                                 "cache_write_tokens":500}})",
     "input_tokens (1000)", "input_tokens_details.cached_tokens"},
    {"openai_completion_tokens_float", v1::PROVIDER_OPENAI,
     R"({"prompt_tokens":100,"completion_tokens":1.5})", "completion_tokens",
     "not an integer"},

    // Gemini.
    {"gemini_missing_prompt", v1::PROVIDER_GEMINI,
     R"({"usageMetadata":{"candidatesTokenCount":5}})",
     "gemini usage needs promptTokenCount", nullptr},
    {"gemini_cached_exceeds_prompt", v1::PROVIDER_GEMINI,
     R"({"promptTokenCount":100,"cachedContentTokenCount":4096})",
     "promptTokenCount (100)", "cachedContentTokenCount (4096)"},
    {"gemini_snake_cached_exceeds_prompt", v1::PROVIDER_GEMINI,
     R"({"usage_metadata":{"prompt_token_count":10,
                           "cached_content_token_count":20}})",
     "prompt_token_count (10)", "cached_content_token_count (20)"},

    // DashScope.
    {"dashscope_missing_prompt", v1::PROVIDER_DASHSCOPE,
     R"({"completion_tokens":5})", "dashscope usage needs prompt_tokens",
     nullptr},
    {"dashscope_parts_exceed_prompt", v1::PROVIDER_DASHSCOPE,
     R"({"prompt_tokens":3000,"prompt_tokens_details":{
             "cached_tokens":2048,"cache_creation_input_tokens":2048}})",
     "prompt_tokens (3000)", "prompt_tokens_details.cached_tokens"},
    {"dashscope_split_exceeds_creation", v1::PROVIDER_DASHSCOPE,
     R"({"prompt_tokens":3000,"prompt_tokens_details":{
             "cache_creation_input_tokens":100,
             "cache_creation":{"ephemeral_5m_input_tokens":200}}})",
     "prompt_tokens_details.cache_creation_input_tokens (100)",
     "ephemeral_5m_input_tokens (200)"},

    // DeepSeek.
    {"deepseek_missing_hit", v1::PROVIDER_DEEPSEEK,
     R"({"prompt_tokens":100,"completion_tokens":1})",
     "deepseek usage needs prompt_cache_hit_tokens", nullptr},
    {"deepseek_hit_only", v1::PROVIDER_DEEPSEEK,
     R"({"prompt_cache_hit_tokens":64})",
     "deepseek usage needs prompt_cache_miss_tokens or prompt_tokens", nullptr},
    {"deepseek_hit_plus_miss_mismatch", v1::PROVIDER_DEEPSEEK,
     R"({"prompt_tokens":1000,"prompt_cache_hit_tokens":640,
         "prompt_cache_miss_tokens":200})",
     "prompt_cache_miss_tokens (200)", "prompt_tokens (1000)"},
    {"deepseek_hit_exceeds_prompt", v1::PROVIDER_DEEPSEEK,
     R"({"prompt_tokens":100,"prompt_cache_hit_tokens":640})",
     "prompt_tokens (100)", "prompt_cache_hit_tokens (640)"},

    // Kimi.
    {"kimi_no_prompt_field", v1::PROVIDER_KIMI, R"({"completion_tokens":5})",
     "kimi usage needs prompt_tokens", "input_tokens"},
    {"kimi_cached_exceeds_prompt", v1::PROVIDER_KIMI,
     R"({"prompt_tokens":100,"cached_tokens":256})", "prompt_tokens (100)",
     "cached_tokens (256)"},
    {"kimi_cached_fields_disagree", v1::PROVIDER_KIMI,
     R"({"prompt_tokens":1000,"cached_tokens":256,
         "prompt_tokens_details":{"cached_tokens":512}})",
     "cached_tokens (256)", "prompt_tokens_details.cached_tokens (512)"},
    {"kimi_anthropic_style_negative", v1::PROVIDER_KIMI,
     R"({"input_tokens":10,"cache_read_input_tokens":-5})",
     "cache_read_input_tokens", "negative"},
};

TEST(UsageNormalizerTest, RejectsInvalidUsage) {
  for (const RejectCase& c : kRejectCases) {
    SCOPED_TRACE(c.name);
    const absl::StatusOr<v1::NormalizedUsage> usage =
        NormalizeRawUsage(c.provider, c.json);
    ASSERT_FALSE(usage.ok());
    EXPECT_EQ(usage.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(usage.status().message(), HasSubstr("raw_usage_json: "));
    EXPECT_THAT(usage.status().message(), HasSubstr(c.field));
    if (c.other_field != nullptr) {
      EXPECT_THAT(usage.status().message(), HasSubstr(c.other_field));
    }
  }
}

TEST(UsageNormalizerTest, AcceptsCountsUpToTheLimit) {
  const absl::StatusOr<v1::NormalizedUsage> usage = NormalizeRawUsage(
      v1::PROVIDER_ANTHROPIC, R"({"input_tokens":1000000000000})");
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_EQ(usage->uncached_input_tokens(), kMaxTokenCount);
}

TEST(UsageNormalizerTest, RejectsSummedSplitAboveTheLimit) {
  const absl::StatusOr<v1::NormalizedUsage> usage =
      NormalizeRawUsage(v1::PROVIDER_BEDROCK,
                        R"({"inputTokens":1,
                            "cacheDetails":[{"ttl":"5m","inputTokens":1000000000000},
                                            {"ttl":"1h","inputTokens":1}]})");
  ASSERT_FALSE(usage.ok());
  EXPECT_EQ(usage.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(usage.status().message(), HasSubstr("cache_write_tokens"));
}

TEST(UsageNormalizerTest, RejectsInputAboveSizeLimit) {
  std::string json = R"({"input_tokens":1,"pad":")";
  json.append(kMaxRawUsageJsonBytes, 'x');
  json.append(R"("})");
  const absl::StatusOr<v1::NormalizedUsage> usage =
      NormalizeRawUsage(v1::PROVIDER_ANTHROPIC, json);
  ASSERT_FALSE(usage.ok());
  EXPECT_EQ(usage.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(usage.status().message(), HasSubstr("65536"));
}

TEST(UsageNormalizerTest, SurvivesDeeplyNestedUnclosedArrays) {
  const std::string json(kMaxRawUsageJsonBytes, '[');
  const absl::StatusOr<v1::NormalizedUsage> usage =
      NormalizeRawUsage(v1::PROVIDER_ANTHROPIC, json);
  ASSERT_FALSE(usage.ok());
  EXPECT_EQ(usage.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(usage.status().message(), HasSubstr("malformed JSON at byte"));
}

TEST(UsageNormalizerTest, SurvivesDeeplyNestedClosedArrays) {
  const std::string json = std::string(kMaxRawUsageJsonBytes / 2, '[') +
                           std::string(kMaxRawUsageJsonBytes / 2, ']');
  const absl::StatusOr<v1::NormalizedUsage> usage =
      NormalizeRawUsage(v1::PROVIDER_OPENAI, json);
  ASSERT_FALSE(usage.ok());
  EXPECT_EQ(usage.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(usage.status().message(), HasSubstr("not an object"));
}

TEST(UsageNormalizerTest, SurvivesDeepNestingInsideUsage) {
  const int depth = 30000;
  const std::string json = R"({"input_tokens":7,"extra":)" +
                           std::string(depth, '[') + std::string(depth, ']') +
                           "}";
  ASSERT_LE(json.size(), kMaxRawUsageJsonBytes);
  const absl::StatusOr<v1::NormalizedUsage> usage =
      NormalizeRawUsage(v1::PROVIDER_ANTHROPIC, json);
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_EQ(usage->uncached_input_tokens(), 7);
}

// A normalized usage (as a client may send it) and the field its
// validation error must name; nullptr when it is valid.
struct ValidateCase {
  const char* name;
  int64_t uncached;
  int64_t read;
  int64_t write;
  int64_t write_5m;
  int64_t write_1h;
  int64_t output;
  const char* error_field;
};

const ValidateCase kValidateCases[] = {
    {"all_zero", 0, 0, 0, 0, 0, 0, nullptr},
    {"split_equals_write", 50, 20000, 1000, 400, 600, 300, nullptr},
    {"split_unknown", 50, 20000, 1000, 0, 0, 300, nullptr},
    {"at_limit", kMaxTokenCount, 0, 0, 0, 0, 0, nullptr},
    {"negative_uncached", -1, 0, 0, 0, 0, 0, "uncached_input_tokens"},
    {"negative_read", 0, -1, 0, 0, 0, 0, "cache_read_tokens"},
    {"negative_write", 0, 0, -1, 0, 0, 0, "cache_write_tokens"},
    {"negative_write_5m", 0, 0, 10, -1, 0, 0, "cache_write_5m_tokens"},
    {"negative_write_1h", 0, 0, 10, 0, -1, 0, "cache_write_1h_tokens"},
    {"negative_output", 0, 0, 0, 0, 0, -1, "output_tokens"},
    {"above_limit", 0, kMaxTokenCount + 1, 0, 0, 0, 0, "cache_read_tokens"},
    {"split_exceeds_write", 0, 0, 1000, 600, 600, 0,
     "cache_write_5m_tokens + cache_write_1h_tokens (1200) exceeds "
     "cache_write_tokens (1000)"},
};

TEST(UsageNormalizerTest, ValidatesNormalizedUsage) {
  for (const ValidateCase& c : kValidateCases) {
    SCOPED_TRACE(c.name);
    v1::NormalizedUsage usage;
    usage.set_uncached_input_tokens(c.uncached);
    usage.set_cache_read_tokens(c.read);
    usage.set_cache_write_tokens(c.write);
    usage.set_cache_write_5m_tokens(c.write_5m);
    usage.set_cache_write_1h_tokens(c.write_1h);
    usage.set_output_tokens(c.output);
    const absl::Status status = ValidateNormalizedUsage(usage);
    if (c.error_field == nullptr) {
      EXPECT_TRUE(status.ok()) << status;
    } else {
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(status.message(), HasSubstr(c.error_field));
    }
  }
}

TEST(UsageNormalizerTest, PromptTotalExcludesOutput) {
  v1::NormalizedUsage usage;
  usage.set_uncached_input_tokens(50);
  usage.set_cache_read_tokens(20000);
  usage.set_cache_write_tokens(1000);
  usage.set_cache_write_1h_tokens(1000);
  usage.set_output_tokens(300);
  EXPECT_EQ(PromptTotalTokens(usage), 21050);
}

struct DiagnosticsCase {
  const char* name;
  const char* raw_json;
  const char* reason;     // nullptr: no diagnostics.
  int64_t missed_tokens;  // -1: not reported.
};

const DiagnosticsCase kDiagnosticsCases[] = {
    {"anthropic_response",
     R"({"id":"msg_1","usage":{"input_tokens":5},"diagnostics":{)"
     R"("cache_miss_reason":{"type":"tools_changed",)"
     R"("cache_missed_input_tokens":19000}}})",
     "tools_changed", 19000},
    {"anthropic_not_found_has_no_tokens",
     R"({"usage":{},"diagnostics":{"cache_miss_reason":)"
     R"({"type":"previous_message_not_found"}}})",
     "previous_message_not_found", -1},
    {"anthropic_null_reason_is_nothing_to_report",
     R"({"usage":{},"diagnostics":{"cache_miss_reason":null}})", nullptr, -1},
    {"anthropic_unknown_vocabulary_kept_verbatim",
     R"({"diagnostics":{"cache_miss_reason":{"type":"speed_changed",)"
     R"("cache_missed_input_tokens":7}}})",
     "speed_changed", 7},
    {"openai_cache_miss",
     R"({"usage":{"input_tokens":4000},"prompt_cache_diagnostics":{)"
     R"("type":"cache_miss","reason":"input_changed",)"
     R"("cache_missed_tokens":3072,"comparison_reusable_tokens":4000}})",
     "input_changed", 3072},
    {"openai_outcome_is_the_word",
     R"({"prompt_cache_diagnostics":{"type":"comparison_response_not_found"}})",
     "comparison_response_not_found", -1},
    {"openai_cache_hit", R"({"prompt_cache_diagnostics":{"type":"cache_hit"}})",
     "cache_hit", -1},
    {"negative_tokens_left_out",
     R"({"diagnostics":{"cache_miss_reason":{"type":"tools_changed",)"
     R"("cache_missed_input_tokens":-5}}})",
     "tools_changed", -1},
    {"absurd_tokens_left_out",
     R"({"diagnostics":{"cache_miss_reason":{"type":"tools_changed",)"
     R"("cache_missed_input_tokens":99999999999999999999}}})",
     "tools_changed", -1},
    {"float_tokens_left_out",
     R"({"prompt_cache_diagnostics":{"type":"cache_miss",)"
     R"("reason":"tools_changed","cache_missed_tokens":1.5}})",
     "tools_changed", -1},
    {"reason_of_the_wrong_type_is_nothing",
     R"({"diagnostics":{"cache_miss_reason":42}})", nullptr, -1},
    {"usage_object_alone_has_none", R"({"input_tokens":5})", nullptr, -1},
    {"malformed_json_is_nothing", R"({"diagnostics":)", nullptr, -1},
    {"not_an_object_is_nothing", R"(["diagnostics"])", nullptr, -1},
};

class ProviderDiagnosticsTest
    : public ::testing::TestWithParam<DiagnosticsCase> {};

TEST_P(ProviderDiagnosticsTest, ParsesTheProvidersOwnWord) {
  const DiagnosticsCase& c = GetParam();
  const std::optional<v1::ProviderCacheDiagnostics> diagnostics =
      ParseProviderDiagnostics(c.raw_json);
  if (c.reason == nullptr) {
    EXPECT_FALSE(diagnostics.has_value());
    return;
  }
  ASSERT_TRUE(diagnostics.has_value());
  EXPECT_EQ(diagnostics->cache_miss_reason(), c.reason);
  EXPECT_EQ(diagnostics->cache_missed_input_tokens(),
            c.missed_tokens < 0 ? 0 : c.missed_tokens);
}

INSTANTIATE_TEST_SUITE_P(
    All, ProviderDiagnosticsTest, ::testing::ValuesIn(kDiagnosticsCases),
    [](const ::testing::TestParamInfo<DiagnosticsCase>& info) {
      return std::string(info.param.name);
    });

TEST(ProviderDiagnosticsBoundTest, LongReasonsAreCutAtACharacterBoundary) {
  // 63 ASCII bytes then a 2-byte character straddling byte 64.
  const std::string reason = std::string(63, 'a') + "\u00e9tail";
  const std::optional<v1::ProviderCacheDiagnostics> diagnostics =
      ParseProviderDiagnostics(
          R"({"diagnostics":{"cache_miss_reason":{"type":")" + reason +
          R"("}}})");
  ASSERT_TRUE(diagnostics.has_value());
  EXPECT_EQ(diagnostics->cache_miss_reason(), std::string(63, 'a'));
  v1::ProviderCacheDiagnostics explicit_field;
  explicit_field.set_cache_miss_reason(std::string(1000, 'x'));
  explicit_field.set_cache_missed_input_tokens(-3);
  const std::optional<v1::ProviderCacheDiagnostics> bounded =
      BoundedDiagnostics(explicit_field);
  ASSERT_TRUE(bounded.has_value());
  EXPECT_EQ(bounded->cache_miss_reason().size(), kMaxProviderMissReasonBytes);
  EXPECT_EQ(bounded->cache_missed_input_tokens(), 0);
  EXPECT_FALSE(BoundedDiagnostics(v1::ProviderCacheDiagnostics()).has_value());
}

}  // namespace
}  // namespace cachewatch
