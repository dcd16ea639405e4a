// Decoding of ingest requests from the wire, one message at a time, so that
// an undecodable record is refused alone instead of ending its call: gRPC
// hands the service raw bytes (see cachewatch_service.h) and this parses
// them, and on failure names the field that made the parse fail (proto3
// rejects a `string` field that is not valid UTF-8).
//
// Pure functions of their arguments; thread-safe.
#ifndef CACHEWATCH_DAEMON_RECEIVER_GRPC_RECORD_DECODER_H_
#define CACHEWATCH_DAEMON_RECEIVER_GRPC_RECORD_DECODER_H_

#include <google/protobuf/message.h>
#include <grpcpp/support/byte_buffer.h>

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "cachewatch/v1/snapshot.pb.h"

namespace cachewatch {

// Parses `bytes` into `message` (cleared first). On failure returns
// InvalidArgument whose message starts with the path of the first bad field,
// e.g. "snapshot.tools[2].name: not valid UTF-8", or "record: not a valid
// protobuf message" when the wire format itself is broken.
absl::Status DecodeMessage(std::string_view bytes,
                           google::protobuf::Message& message);

// The same for a message gRPC received.
absl::Status DecodeMessage(const grpc::ByteBuffer& buffer,
                           google::protobuf::Message& message);

// What can still be read of a RecordRequest that failed to decode, so that
// its refusal can be acknowledged by request id.
struct RecordIdentity {
  bool is_usage = false;   // The usage field was present.
  std::string request_id;  // Empty when absent or itself undecodable.
};
RecordIdentity PeekRecordIdentity(std::string_view bytes);

// The bytes of a gRPC message in one slice: the message's own slice when
// gRPC holds it in one (no copy), else a copy; an empty slice when the
// buffer cannot be read.
grpc::Slice SingleSlice(const grpc::ByteBuffer& buffer);

// Parses a RecordRequest that holds a snapshot and nothing else (what
// clients send) straight into `snapshot`, with no RecordRequest around it,
// so that a caller can decode into a message it reuses (snapshot_pool.h).
// Returns false for any other request, or when the snapshot does not parse,
// with `snapshot` in an unspecified state: the caller then decodes the bytes
// as a RecordRequest (DecodeMessage), which names what is wrong. When it
// returns true, `snapshot` equals what DecodeMessage gives as the request's
// snapshot.
bool DecodeSnapshotRecord(std::string_view bytes, v1::Snapshot& snapshot);

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_RECEIVER_GRPC_RECORD_DECODER_H_
