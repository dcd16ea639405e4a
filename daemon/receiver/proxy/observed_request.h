// Reads the body of a request the proxy forwarded into the snapshot the
// client library would build for it (client/include/cachewatch/client/):
// tools in request order with their RFC 8785 + XXH3 schema hashes, the system
// prompt's hash and named sections, the message chain per content block,
// the cache_control layout, the model and the hash of the cache-keying
// request options. The rules per API are in docs/PROXY.md, "Observation".
//
// Only hashes, names and counts come out: no text of the prompt is kept.
//
// Pure functions; thread-safe.
#ifndef CACHEWATCH_DAEMON_RECEIVER_PROXY_OBSERVED_REQUEST_H_
#define CACHEWATCH_DAEMON_RECEIVER_PROXY_OBSERVED_REQUEST_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "cachewatch/v1/snapshot.pb.h"
#include "daemon/receiver/proxy/http_exchange.h"
#include "daemon/receiver/proxy/proxy_endpoint.h"

namespace cachewatch {

// The deepest nesting of arrays and objects a request body may have.
inline constexpr int kMaxRequestBodyDepth = 256;

// The longest session id taken from a body (Snapshot.session_id's limit).
inline constexpr size_t kMaxBodySessionIdBytes = 256;

struct ObservedRequest {
  // The snapshot, without agent, session_id, lane, request_id, request_time
  // and expected_drop (the observer sets them). tool_order_policy is
  // TOOL_ORDER_POLICY_REGISTRATION: the tools are listed as sent.
  v1::Snapshot snapshot;
  // The session id the body carries: Claude Code's in Anthropic
  // metadata.user_id (either form), or OpenAI prompt_cache_key; empty when
  // none.
  std::string body_session_id;
  // XXH3-64 over the system hash and the tools' names and schema hashes:
  // what tells parallel subagents apart.
  uint64_t prefix_identity = 0;
  // The history starts with a compaction summary (docs/PROXY.md, "Lanes").
  bool compaction_marker = false;
  // Responses API previous_response_id; empty when none. When set, the
  // context lives on the provider and the snapshot has no message chain.
  std::string previous_response_id;
  // "stream": true.
  bool stream = false;
  // Chat Completions stream_options.include_usage is true.
  bool include_usage = false;
  // The body already names the provider diagnostics field (Anthropic
  // "diagnostics", OpenAI "prompt_cache_options").
  bool has_diagnostics_field = false;
};

// XXH3-64 over `system_hash` and the tools' names and schema hashes, in
// order: ObservedRequest::prefix_identity of a snapshot with these.
uint64_t PrefixIdentityOf(
    uint64_t system_hash,
    const google::protobuf::RepeatedPtrField<v1::ToolRef>& tools);

// Reads `body`, a request to `api` whose cache rules are `provider`'s, with
// `headers` (the anthropic-beta header keys Anthropic's cache).
// ResourceExhausted when the body is over `max_body_bytes`; InvalidArgument,
// starting "request body: " and naming what is wrong, when it is not a JSON
// object, nests deeper than kMaxRequestBodyDepth, lacks the model or the
// messages, or has a tool, system block or content block of the wrong type
// or not canonicalizable (canonical_json.h).
absl::StatusOr<ObservedRequest> ReadObservedRequest(ProxyApi api,
                                                    v1::Provider provider,
                                                    const HttpHeaders& headers,
                                                    std::string_view body,
                                                    size_t max_body_bytes);

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_RECEIVER_PROXY_OBSERVED_REQUEST_H_
