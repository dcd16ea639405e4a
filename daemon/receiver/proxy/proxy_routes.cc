#include "daemon/receiver/proxy/proxy_routes.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

namespace cachewatch {
namespace {

absl::Status Invalid(std::string_view flag, std::string_view why) {
  return absl::InvalidArgumentError("--proxy-upstream '" + std::string(flag) +
                                    "': " + std::string(why));
}

bool ValidRoute(std::string_view route) {
  if (route == "anthropic" || route == "openai") return true;
  if (route.size() < 2 || route[0] != '/' || route.back() == '/') return false;
  return std::all_of(route.begin() + 1, route.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' ||
           c == '_' || c == '.' || c == '/';
  });
}

}  // namespace

absl::StatusOr<ProxyUpstream> ParseProxyUpstream(std::string_view flag) {
  const size_t equals = flag.find('=');
  if (equals == std::string_view::npos) {
    return Invalid(flag, "expected ROUTE=URL");
  }
  ProxyUpstream upstream;
  upstream.route = std::string(flag.substr(0, equals));
  if (!ValidRoute(upstream.route)) {
    return Invalid(flag,
                   "ROUTE must be anthropic, openai or /PREFIX (letters, "
                   "digits, - _ . /, no trailing /)");
  }
  std::string_view url = flag.substr(equals + 1);
  upstream.url = std::string(url);
  if (url.substr(0, 8) == "https://") {
    url.remove_prefix(8);
  } else if (url.substr(0, 7) == "http://") {
    upstream.tls = false;
    url.remove_prefix(7);
  } else {
    return Invalid(flag, "URL must start with http:// or https://");
  }
  if (url.find_first_of("?#@") != std::string_view::npos) {
    return Invalid(flag, "URL may not have a query, fragment or user");
  }
  const size_t slash = url.find('/');
  std::string_view authority = url.substr(0, slash);
  if (slash != std::string_view::npos) {
    std::string_view path = url.substr(slash);
    while (!path.empty() && path.back() == '/') path.remove_suffix(1);
    upstream.base_path = std::string(path);
  }
  std::string_view port;
  if (!authority.empty() && authority[0] == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return Invalid(flag, "unclosed [");
    upstream.host = std::string(authority.substr(1, close - 1));
    std::string_view rest = authority.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return Invalid(flag, "junk after ]");
      port = rest.substr(1);
    }
  } else {
    const size_t colon = authority.rfind(':');
    upstream.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (upstream.host.empty()) return Invalid(flag, "URL has no host");
  const std::string default_port = upstream.tls ? "443" : "80";
  if (port.empty()) {
    upstream.port = default_port;
  } else {
    if (port.size() > 5 ||
        !std::all_of(port.begin(), port.end(),
                     [](char c) {
                       return std::isdigit(static_cast<unsigned char>(c));
                     }) ||
        std::stoi(std::string(port)) == 0 ||
        std::stoi(std::string(port)) > 65535) {
      return Invalid(flag, "bad port");
    }
    upstream.port = std::string(port);
  }
  const std::string host_part = upstream.host.find(':') != std::string::npos
                                    ? "[" + upstream.host + "]"
                                    : upstream.host;
  upstream.host_header = upstream.port == default_port
                             ? host_part
                             : host_part + ":" + upstream.port;
  return upstream;
}

std::string ProxyErrorBody(ErrorShape shape, std::string_view type,
                           std::string_view message) {
  nlohmann::ordered_json body;
  if (shape == ErrorShape::kAnthropic) {
    body = {{"type", "error"},
            {"error", {{"type", type}, {"message", message}}}};
  } else {
    body = {{"error",
             {{"message", message},
              {"type", type},
              {"param", nullptr},
              {"code", nullptr}}}};
  }
  return body.dump();
}

absl::StatusOr<ProxyRoutes> ProxyRoutes::Make(
    const std::vector<std::string>& flags) {
  std::vector<ProxyUpstream> given;
  for (const std::string& flag : flags) {
    absl::StatusOr<ProxyUpstream> upstream = ParseProxyUpstream(flag);
    if (!upstream.ok()) return upstream.status();
    for (const ProxyUpstream& other : given) {
      if (other.route == upstream->route) {
        return Invalid(flag, "route " + other.route + " given twice");
      }
    }
    given.push_back(*std::move(upstream));
  }
  for (const char* fallback : {"anthropic=https://api.anthropic.com",
                               "openai=https://api.openai.com"}) {
    const std::string_view route = std::string_view(fallback).substr(
        0, std::string_view(fallback).find('='));
    if (std::none_of(given.begin(), given.end(), [&](const ProxyUpstream& u) {
          return u.route == route;
        })) {
      given.push_back(*ParseProxyUpstream(fallback));
    }
  }
  // Prefix routes longest first, then anthropic, then openai.
  auto rank = [](const ProxyUpstream& u) {
    return u.route == "anthropic" ? 1 : u.route == "openai" ? 2 : 0;
  };
  std::stable_sort(given.begin(), given.end(),
                   [&](const ProxyUpstream& a, const ProxyUpstream& b) {
                     if (rank(a) != rank(b)) return rank(a) < rank(b);
                     return a.route.size() > b.route.size();
                   });
  ProxyRoutes routes;
  routes.upstreams_ = std::move(given);
  return routes;
}

ProxyRoutes::Match ProxyRoutes::Route(std::string_view target,
                                      bool anthropic_request) const {
  for (const ProxyUpstream& upstream : upstreams_) {
    if (upstream.route[0] != '/') break;
    const std::string_view prefix = upstream.route;
    if (target.substr(0, prefix.size()) != prefix) continue;
    std::string_view rest = target.substr(prefix.size());
    if (!rest.empty() && rest[0] != '/' && rest[0] != '?') continue;
    std::string path = upstream.base_path;
    if (rest.empty() || rest[0] == '?') path += "/";
    path += rest;
    return {&upstream, std::move(path)};
  }
  const std::string_view wanted = anthropic_request ? "anthropic" : "openai";
  for (const ProxyUpstream& upstream : upstreams_) {
    if (upstream.route == wanted) {
      return {&upstream, upstream.base_path + std::string(target)};
    }
  }
  return {&upstreams_.back(), std::string(target)};  // Unreachable: defaults.
}

}  // namespace cachewatch
