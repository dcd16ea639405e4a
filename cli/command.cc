#include "cli/command.h"

#include <iostream>

namespace cachewatch::cli {

void AddGlobalOptions(CLI::App& app, GlobalOptions& options) {
  app.add_option("--address", options.address,
                 "cachewatchd gRPC address (host:port)")
      ->envname("CACHEWATCH_ADDRESS")
      ->capture_default_str();
  app.add_option("--timeout", options.timeout_seconds,
                 "Seconds to wait for the daemon on connect and unary calls")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--tls-ca", options.tls_ca,
                 "PEM CA of the daemon's certificate; enables TLS")
      ->envname("CACHEWATCH_TLS_CA")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-cert", options.tls_cert,
                 "PEM client certificate for mutual TLS")
      ->envname("CACHEWATCH_TLS_CERT")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-key", options.tls_key, "PEM client key for mutual TLS")
      ->envname("CACHEWATCH_TLS_KEY")
      ->check(CLI::ExistingFile);
  app.add_option("--token", options.token,
                 "Bearer token for a daemon started with --auth-token-file")
      ->envname("CACHEWATCH_TOKEN");
  app.fallthrough();
}

int ExitStatusFor(const absl::Status& status) {
  if (status.ok()) return 0;
  std::cerr << "cachewatch: " << status.message() << "\n";
  return status.code() == absl::StatusCode::kInvalidArgument ? kExitUsage
                                                             : kExitFailure;
}

int ExitStatusForParseError(const CLI::App& app, const CLI::ParseError& error) {
  const int cli11_status = app.exit(error);
  return cli11_status == static_cast<int>(CLI::ExitCodes::Success) ? 0
                                                                   : kExitUsage;
}

}  // namespace cachewatch::cli
