// Connecting to cachewatchd and turning RPC failures into statuses with a
// message a person can act on.
//
// Thread-safe: plain functions.
#ifndef CACHEWATCH_CLI_DAEMON_CONNECTION_H_
#define CACHEWATCH_CLI_DAEMON_CONNECTION_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cachewatch/v1/service.grpc.pb.h"
#include "cli/command.h"

namespace cachewatch::cli {

// Opens a channel to options.address and waits, at most
// options.timeout_seconds, until it is connected. Returns Unavailable
// "cannot reach cachewatchd at ADDRESS (is it running?)" when the daemon
// refuses or does not answer in time; the error of ReadFileToString, naming
// the file, when a TLS file (--tls-ca, --tls-cert, --tls-key) cannot be read.
absl::StatusOr<std::unique_ptr<v1::CacheWatch::Stub>> ConnectToDaemon(
    const GlobalOptions& options);

// Adds the bearer token, if any, to a call.
void Authorize(grpc::ClientContext& context, const GlobalOptions& options);

// The deadline of a unary call started now.
std::chrono::system_clock::time_point UnaryDeadline(
    const GlobalOptions& options);

// The status for a failed RPC named `rpc`: Unavailable as above when the
// daemon went away, else "<rpc>: <message>" with gRPC's code mapped onto
// absl's. OK stays OK.
absl::Status FromRpcStatus(const grpc::Status& status, std::string_view rpc,
                           const GlobalOptions& options);

}  // namespace cachewatch::cli

#endif  // CACHEWATCH_CLI_DAEMON_CONNECTION_H_
