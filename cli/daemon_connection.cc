#include "cli/daemon_connection.h"

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/util/file.h"
#include "daemon/util/status_macros.h"

namespace cachewatch::cli {
namespace {

absl::Status Unreachable(const GlobalOptions& options) {
  return absl::UnavailableError(absl::StrCat(
      "cannot reach cachewatchd at ", options.address, " (is it running?)"));
}

// The channel's credentials; an error naming the TLS file that cannot be
// read.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> Credentials(
    const GlobalOptions& options) {
  if (options.tls_ca.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  CACHEWATCH_ASSIGN_OR_RETURN(ssl.pem_root_certs,
                              ReadFileToString(options.tls_ca));
  if (!options.tls_cert.empty()) {
    CACHEWATCH_ASSIGN_OR_RETURN(ssl.pem_cert_chain,
                                ReadFileToString(options.tls_cert));
    CACHEWATCH_ASSIGN_OR_RETURN(ssl.pem_private_key,
                                ReadFileToString(options.tls_key));
  }
  return grpc::SslCredentials(ssl);
}

}  // namespace

void Authorize(grpc::ClientContext& context, const GlobalOptions& options) {
  if (!options.token.empty()) {
    context.AddMetadata("authorization", "Bearer " + options.token);
  }
}

std::chrono::system_clock::time_point UnaryDeadline(
    const GlobalOptions& options) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(
             std::chrono::duration<double>(options.timeout_seconds));
}

absl::StatusOr<std::unique_ptr<v1::CacheWatch::Stub>> ConnectToDaemon(
    const GlobalOptions& options) {
  CACHEWATCH_ASSIGN_OR_RETURN(
      std::shared_ptr<grpc::ChannelCredentials> credentials,
      Credentials(options));
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel(options.address, credentials);
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
