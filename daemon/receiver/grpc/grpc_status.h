// The gRPC status of an absl::Status: the same code (absl's codes are
// gRPC's) and message. Used by the receivers' answers.
//
// Thread-safe: a pure function.
#ifndef CACHEWATCH_DAEMON_RECEIVER_GRPC_GRPC_STATUS_H_
#define CACHEWATCH_DAEMON_RECEIVER_GRPC_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"

namespace cachewatch {

inline grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_RECEIVER_GRPC_GRPC_STATUS_H_
