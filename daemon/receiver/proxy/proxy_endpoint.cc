#include "daemon/receiver/proxy/proxy_endpoint.h"

#include <array>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace cachewatch {
namespace {

bool HostMatches(std::string_view host, std::string_view suffix) {
  if (host.size() < suffix.size()) return false;
  if (host.substr(host.size() - suffix.size()) != suffix) return false;
  return host.size() == suffix.size() ||
         host[host.size() - suffix.size() - 1] == '.';
}

struct BuiltInHost {
  std::string_view suffix;
  v1::Provider provider;
};

constexpr std::array<BuiltInHost, 8> kBuiltInHosts = {{
    {"anthropic.com", v1::PROVIDER_ANTHROPIC},
    {"openai.com", v1::PROVIDER_OPENAI},
    {"openrouter.ai", v1::PROVIDER_OPENAI},
    {"aliyuncs.com", v1::PROVIDER_DASHSCOPE},
    {"deepseek.com", v1::PROVIDER_DEEPSEEK},
    {"moonshot.cn", v1::PROVIDER_KIMI},
    {"moonshot.ai", v1::PROVIDER_KIMI},
    {"kimi.com", v1::PROVIDER_KIMI},
}};

v1::Provider HostProvider(std::string_view upstream_host,
                          const ProviderHosts& hosts) {
  const std::string host = absl::AsciiStrToLower(
      std::string(upstream_host.substr(0, upstream_host.find(':'))));
  if (host.empty()) return v1::PROVIDER_UNSPECIFIED;
  for (const auto& [suffix, provider] : hosts) {
    if (HostMatches(host, absl::AsciiStrToLower(suffix))) return provider;
  }
  for (const BuiltInHost& known : kBuiltInHosts) {
    if (HostMatches(host, known.suffix)) return known.provider;
  }
  return v1::PROVIDER_UNSPECIFIED;
}

}  // namespace

absl::StatusOr<ProxyApi> EndpointOf(std::string_view method,
                                    std::string_view target) {
  const std::string_view path = target.substr(0, target.find('?'));
  if (method == "POST") {
    if (path.ends_with("/v1/messages")) {
      return ProxyApi::kAnthropicMessages;
    }
    if (path.ends_with("/chat/completions")) return ProxyApi::kOpenAiChat;
    if (path.ends_with("/v1/responses")) {
      return ProxyApi::kOpenAiResponses;
    }
  }
  return absl::NotFoundError(
      absl::StrCat("not an observed endpoint: ",
                   absl::string_view(method.data(), method.size()), " ",
                   absl::string_view(path.data(), path.size())));
}

v1::Provider ProviderOf(ProxyApi api, std::string_view upstream_host,
                        std::string_view target, const ProviderHosts& hosts) {
  v1::Provider provider = HostProvider(upstream_host, hosts);
  if (provider == v1::PROVIDER_UNSPECIFIED &&
      target.substr(0, target.find('?')).find("/compatible-mode/") !=
          std::string_view::npos) {
    provider = v1::PROVIDER_DASHSCOPE;
  }
  if (api == ProxyApi::kAnthropicMessages) {
    return provider == v1::PROVIDER_KIMI ? v1::PROVIDER_KIMI
                                         : v1::PROVIDER_ANTHROPIC;
  }
  switch (provider) {
    case v1::PROVIDER_DASHSCOPE:
    case v1::PROVIDER_DEEPSEEK:
    case v1::PROVIDER_KIMI:
      return provider;
    default:
      return v1::PROVIDER_OPENAI;
  }
}

}  // namespace cachewatch
