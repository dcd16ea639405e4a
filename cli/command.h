// What every cachewatch subcommand shares: the global flags, and how a
// command's outcome becomes the process's exit status.
//
// Exit statuses: 0 success; 1 a failure (daemon unreachable, an RPC failed,
// a file cannot be read, records refused); 2 a usage error (bad flags or
// arguments). A command reports its outcome as an absl::Status:
// InvalidArgument is a usage error, any other error is a failure.
#ifndef CACHEWATCH_CLI_COMMAND_H_
#define CACHEWATCH_CLI_COMMAND_H_

#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"

namespace cachewatch::cli {

inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

struct GlobalOptions {
  // The daemon's gRPC address. Default: $CACHEWATCH_ADDRESS, else
  // 127.0.0.1:50051.
  std::string address = "127.0.0.1:50051";
  // Deadline of unary calls and of connecting, in seconds. Default 10.
  double timeout_seconds = 10;
  // TLS: the CA that signed the daemon's certificate (PEM file); empty
  // connects in plaintext. With a client certificate and key: mutual TLS.
  std::string tls_ca;
  std::string tls_cert;
  std::string tls_key;
  // Bearer token sent with every call ($CACHEWATCH_TOKEN); empty: none.
  std::string token;
};

// Adds --address, --timeout, the TLS options and --token to `app`;
// subcommands inherit them.
void AddGlobalOptions(CLI::App& app, GlobalOptions& options);

// Prints "cachewatch: <message>" on stderr for an error and returns the exit
// status for `status`.
int ExitStatusFor(const absl::Status& status);

// Prints what CLI11 has to say (help goes to stdout) and returns 0 for
// --help, kExitUsage otherwise.
int ExitStatusForParseError(const CLI::App& app, const CLI::ParseError& error);

}  // namespace cachewatch::cli

#endif  // CACHEWATCH_CLI_COMMAND_H_
