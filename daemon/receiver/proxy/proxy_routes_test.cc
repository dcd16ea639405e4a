#include "daemon/receiver/proxy/proxy_routes.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace cachewatch {
namespace {

using ::testing::HasSubstr;

TEST(ParseProxyUpstreamTest, HttpsWithDefaultPort) {
  absl::StatusOr<ProxyUpstream> u =
      ParseProxyUpstream("anthropic=https://api.anthropic.com");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->route, "anthropic");
  EXPECT_TRUE(u->tls);
  EXPECT_EQ(u->host, "api.anthropic.com");
  EXPECT_EQ(u->port, "443");
  EXPECT_EQ(u->base_path, "");
  EXPECT_EQ(u->host_header, "api.anthropic.com");
}

TEST(ParseProxyUpstreamTest, HttpPortAndBasePathWithoutTrailingSlash) {
  absl::StatusOr<ProxyUpstream> u =
      ParseProxyUpstream("/dashscope=http://127.0.0.1:9000/compatible-mode/");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_FALSE(u->tls);
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, "9000");
  EXPECT_EQ(u->base_path, "/compatible-mode");
  EXPECT_EQ(u->host_header, "127.0.0.1:9000");
}

TEST(ParseProxyUpstreamTest, Ipv6Host) {
  absl::StatusOr<ProxyUpstream> u =
      ParseProxyUpstream("openai=https://[::1]:8443");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->host_header, "[::1]:8443");
}

TEST(ParseProxyUpstreamTest, RejectsBadValuesNamingTheFlag) {
  for (const char* bad :
       {"https://api.anthropic.com", "anthropic=ftp://x", "google=https://x",
        "/=https://x", "/a/=https://x", "openai=https://", "openai=https://x:0",
        "openai=https://x:99999", "openai=https://x:8a", "openai=https://x?a=1",
        "openai=https://u@x", "openai=https://[::1"}) {
    absl::StatusOr<ProxyUpstream> u = ParseProxyUpstream(bad);
    EXPECT_EQ(u.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(u.status().message(), HasSubstr("--proxy-upstream")) << bad;
  }
}

TEST(ProxyRoutesTest, DefaultsSendAnthropicRequestsToAnthropic) {
  absl::StatusOr<ProxyRoutes> routes = ProxyRoutes::Make({});
  ASSERT_TRUE(routes.ok());
  ProxyRoutes::Match m = routes->Route("/v1/messages?beta=true", true);
  EXPECT_EQ(m.upstream->host, "api.anthropic.com");
  EXPECT_EQ(m.target, "/v1/messages?beta=true");
  m = routes->Route("/v1/models", false);
  EXPECT_EQ(m.upstream->host, "api.openai.com");
  EXPECT_EQ(m.target, "/v1/models");
}

TEST(ProxyRoutesTest, BasePathIsPutInFront) {
  absl::StatusOr<ProxyRoutes> routes = ProxyRoutes::Make(
      {"openai=https://dashscope-intl.aliyuncs.com/compatible-mode"});
  ASSERT_TRUE(routes.ok());
  ProxyRoutes::Match m = routes->Route("/v1/chat/completions", false);
  EXPECT_EQ(m.upstream->host, "dashscope-intl.aliyuncs.com");
  EXPECT_EQ(m.target, "/compatible-mode/v1/chat/completions");
  EXPECT_EQ(routes->Route("/v1/messages", true).upstream->host,
            "api.anthropic.com");
}

TEST(ProxyRoutesTest, PrefixRoutesWinLongestFirstAndAreStripped) {
  absl::StatusOr<ProxyRoutes> routes =
      ProxyRoutes::Make({"/deepseek=https://api.deepseek.com",
                         "/deepseek/beta=https://api.deepseek.com/beta",
                         "/openrouter=https://openrouter.ai/api"});
  ASSERT_TRUE(routes.ok());
  ProxyRoutes::Match m = routes->Route("/deepseek/v1/chat/completions", true);
  EXPECT_EQ(m.upstream->route, "/deepseek");
  EXPECT_EQ(m.target, "/v1/chat/completions");
  m = routes->Route("/deepseek/beta/completions", false);
  EXPECT_EQ(m.upstream->route, "/deepseek/beta");
  EXPECT_EQ(m.target, "/beta/completions");
  m = routes->Route("/openrouter?x=1", false);
  EXPECT_EQ(m.target, "/api/?x=1");
  // Not a path segment boundary: the default route.
  m = routes->Route("/deepseekx/v1/chat/completions", false);
  EXPECT_EQ(m.upstream->route, "openai");
  EXPECT_EQ(m.target, "/deepseekx/v1/chat/completions");
}

TEST(ProxyRoutesTest, RouteGivenTwiceIsRejected) {
  absl::StatusOr<ProxyRoutes> routes = ProxyRoutes::Make(
      {"openai=https://a.example", "openai=https://b.example"});
  EXPECT_EQ(routes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(routes.status().message(), HasSubstr("given twice"));
}

TEST(ProxyErrorBodyTest, ProviderShapes) {
  nlohmann::json anthropic = nlohmann::json::parse(
      ProxyErrorBody(ErrorShape::kAnthropic, "api_error", "down"));
  EXPECT_EQ(anthropic["type"], "error");
  EXPECT_EQ(anthropic["error"]["type"], "api_error");
  EXPECT_EQ(anthropic["error"]["message"], "down");
  nlohmann::json openai = nlohmann::json::parse(
      ProxyErrorBody(ErrorShape::kOpenAI, "server_error", "down \"x\""));
  EXPECT_EQ(openai["error"]["type"], "server_error");
  EXPECT_EQ(openai["error"]["message"], "down \"x\"");
}

}  // namespace
}  // namespace cachewatch
