#include "daemon/receiver/proxy/proxy_endpoint.h"

#include "gtest/gtest.h"

namespace cachewatch {
namespace {

TEST(ProxyEndpointTest, ObservedEndpoints) {
  const struct {
    std::string_view target;
    ProxyApi api;
  } kCases[] = {
      {"/v1/messages", ProxyApi::kAnthropicMessages},
      {"/v1/messages?beta=true", ProxyApi::kAnthropicMessages},
      {"/anthropic/v1/messages", ProxyApi::kAnthropicMessages},
      {"/v1/chat/completions", ProxyApi::kOpenAiChat},
      {"/chat/completions", ProxyApi::kOpenAiChat},
      {"/compatible-mode/v1/chat/completions", ProxyApi::kOpenAiChat},
      {"/api/v1/chat/completions", ProxyApi::kOpenAiChat},
      {"/v1/responses", ProxyApi::kOpenAiResponses},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.target);
    absl::StatusOr<ProxyApi> api = EndpointOf("POST", c.target);
    ASSERT_TRUE(api.ok()) << api.status();
    EXPECT_EQ(*api, c.api);
  }
}

TEST(ProxyEndpointTest, OtherEndpointsAreNotFound) {
  for (const auto& [method, target] :
       std::initializer_list<std::pair<std::string_view, std::string_view>>{
           {"GET", "/v1/messages"},
           {"POST", "/v1/messages/count_tokens"},
           {"POST", "/v1/messages/batches"},
           {"GET", "/v1/models"},
           {"POST", "/v1/embeddings"},
           {"POST", "/v1/responses/resp_1/cancel"},
           {"POST", "/"}}) {
    SCOPED_TRACE(target);
    EXPECT_EQ(EndpointOf(method, target).status().code(),
              absl::StatusCode::kNotFound);
  }
}

TEST(ProxyEndpointTest, ProviderFromHostPathAndApi) {
  const ProviderHosts custom = {{"llm.example.com", v1::PROVIDER_DEEPSEEK}};
  const struct {
    ProxyApi api;
    std::string_view host;
    std::string_view target;
    v1::Provider provider;
  } kCases[] = {
      {ProxyApi::kAnthropicMessages, "", "/v1/messages",
       v1::PROVIDER_ANTHROPIC},
      {ProxyApi::kAnthropicMessages, "api.anthropic.com", "/v1/messages",
       v1::PROVIDER_ANTHROPIC},
      {ProxyApi::kAnthropicMessages, "api.moonshot.ai",
       "/anthropic/v1/messages", v1::PROVIDER_KIMI},
      {ProxyApi::kAnthropicMessages, "api.deepseek.com",
       "/anthropic/v1/messages", v1::PROVIDER_ANTHROPIC},
      {ProxyApi::kOpenAiChat, "", "/v1/chat/completions", v1::PROVIDER_OPENAI},
      {ProxyApi::kOpenAiChat, "api.openai.com", "/v1/chat/completions",
       v1::PROVIDER_OPENAI},
      {ProxyApi::kOpenAiChat, "openrouter.ai", "/api/v1/chat/completions",
       v1::PROVIDER_OPENAI},
      {ProxyApi::kOpenAiChat, "dashscope-intl.aliyuncs.com:443",
       "/compatible-mode/v1/chat/completions", v1::PROVIDER_DASHSCOPE},
      {ProxyApi::kOpenAiChat, "", "/compatible-mode/v1/chat/completions",
       v1::PROVIDER_DASHSCOPE},
      {ProxyApi::kOpenAiChat, "API.DeepSeek.com", "/chat/completions",
       v1::PROVIDER_DEEPSEEK},
      {ProxyApi::kOpenAiChat, "api.moonshot.cn", "/v1/chat/completions",
       v1::PROVIDER_KIMI},
      {ProxyApi::kOpenAiChat, "llm.example.com", "/v1/chat/completions",
       v1::PROVIDER_DEEPSEEK},
      {ProxyApi::kOpenAiChat, "notdeepseek.com", "/v1/chat/completions",
       v1::PROVIDER_OPENAI},
      {ProxyApi::kOpenAiResponses, "127.0.0.1:9000", "/v1/responses",
       v1::PROVIDER_OPENAI},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(std::string(c.host) + std::string(c.target));
    EXPECT_EQ(ProviderOf(c.api, c.host, c.target, custom), c.provider);
  }
}

}  // namespace
}  // namespace cachewatch
