// Undoes a response's Content-Encoding for observation (the agent gets the
// encoded bytes as the upstream sent them; the observer needs the JSON or
// event stream). SDKs send `accept-encoding: gzip, deflate`, so providers
// may compress.
//
// Pure function; thread-safe.
#ifndef CACHEWATCH_DAEMON_RECEIVER_PROXY_CONTENT_DECODING_H_
#define CACHEWATCH_DAEMON_RECEIVER_PROXY_CONTENT_DECODING_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace cachewatch {

// `encoding` is the Content-Encoding value ("" or identity: `body` as it
// is; gzip, x-gzip or deflate: inflated). Unimplemented for any other
// coding (e.g. br, or several); InvalidArgument for a corrupt body;
// ResourceExhausted when the decoded body would exceed `max_bytes`.
absl::StatusOr<std::string> DecodeContent(std::string_view encoding,
                                          std::string_view body,
                                          size_t max_bytes);

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_RECEIVER_PROXY_CONTENT_DECODING_H_
