// One request/response pair the HTTP proxy forwarded, as the observer sees
// it once the response has ended. It holds prompt text: an HttpExchange
// never leaves the proxy's memory, and the observer keeps only hashes,
// names and counts of it.
#ifndef CACHEWATCH_DAEMON_RECEIVER_PROXY_HTTP_EXCHANGE_H_
#define CACHEWATCH_DAEMON_RECEIVER_PROXY_HTTP_EXCHANGE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace cachewatch {

// Header names are lower-cased; values as received; arrival order kept.
using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpExchange {
  std::string method;  // e.g. "POST".
  std::string target;  // Path and query, e.g. "/v1/messages?beta=true".
  HttpHeaders request_headers;
  // The host the request was forwarded to (e.g. "api.deepseek.com"), which
  // names the provider behind an OpenAI-compatible route; empty when
  // unknown.
  std::string upstream_host;
  std::string request_body;
  // 0 when no response came from the upstream (unreachable).
  int response_status = 0;
  HttpHeaders response_headers;
  // The response body exactly as sent to the agent; for a server-sent
  // event stream, the whole event stream.
  std::string response_body;
  // False when the upstream's response ended before its end (a dropped
  // stream, a truncated body).
  bool response_complete = false;
  int64_t request_unix_us = 0;   // When the request arrived (proxy clock).
  int64_t response_unix_us = 0;  // When the response ended.
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_RECEIVER_PROXY_HTTP_EXCHANGE_H_
