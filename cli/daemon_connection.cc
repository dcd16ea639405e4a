#include "cli/daemon_connection.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace cachewatch::cli {
namespace {

absl::Status Unreachable(const GlobalOptions& options) {
  return absl::UnavailableError(absl::StrCat(
      "cannot reach cachewatchd at ", options.address, " (is it running?)"));
}

}  // namespace

std::chrono::system_clock::time_point UnaryDeadline(
    const GlobalOptions& options) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(
             std::chrono::duration<double>(options.timeout_seconds));
}

absl::StatusOr<std::unique_ptr<v1::CacheWatch::Stub>> ConnectToDaemon(
    const GlobalOptions& options) {
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(options.address, grpc::InsecureChannelCredentials());
  const auto deadline = UnaryDeadline(options);
  // Fails fast on a refused connection instead of retrying until the
  // deadline, as WaitForConnected would.
  for (;;) {
    const grpc_connectivity_state state = channel->GetState(true);
    if (state == GRPC_CHANNEL_READY) break;
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE ||
        state == GRPC_CHANNEL_SHUTDOWN ||
        !channel->WaitForStateChange(state, deadline)) {
      return Unreachable(options);
    }
  }
  return v1::CacheWatch::NewStub(channel);
}

absl::Status FromRpcStatus(const grpc::Status& status, std::string_view rpc,
                           const GlobalOptions& options) {
  if (status.ok()) return absl::OkStatus();
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    return Unreachable(options);
  }
  return absl::Status(
      static_cast<absl::StatusCode>(status.error_code()),
      absl::StrCat(std::string(rpc), ": ", status.error_message()));
}

}  // namespace cachewatch::cli
