#include "daemon/receiver/grpc/record_decoder.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/stubs/common.h>
#include <google/protobuf/wire_format_lite.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "cachewatch/v1/service.pb.h"
#include "daemon/util/status_macros.h"

namespace cachewatch {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

// Deeper nesting than any cachewatch message has is malformed input.
constexpr int kMaxDepth = 16;

bool IsValidUtf8(const std::string& text) {
  // The validator protobuf itself applies to proto3 strings.
  return google::protobuf::internal::IsStructurallyValidUTF8(
      text.data(), static_cast<int>(text.size()));
}

absl::Status Malformed(const std::string& path) {
  return absl::InvalidArgumentError(absl::StrCat(
      path.empty() ? "record" : path, ": not a valid protobuf message"));
}

// Walks the wire format of one message of type `descriptor` and returns the
// first field protobuf would refuse: a string that is not UTF-8, or bytes
// that do not parse. `path` names the message ("" at the top, else
// "snapshot.tools[2]").
absl::Status FindBadField(CodedInputStream& input, const Descriptor* descriptor,
                          const std::string& path, int depth) {
  std::map<int, int> occurrences;  // Per field number, for repeated indices.
  for (;;) {
    const uint32_t tag = input.ReadTag();
    if (tag == 0) {
      return input.ExpectAtEnd() ? absl::OkStatus() : Malformed(path);
    }
    const int number = WireFormatLite::GetTagFieldNumber(tag);
    const FieldDescriptor* field = descriptor->FindFieldByNumber(number);
    const bool length_delimited = WireFormatLite::GetTagWireType(tag) ==
                                  WireFormatLite::WIRETYPE_LENGTH_DELIMITED;
    if (field == nullptr || !length_delimited ||
        (field->type() != FieldDescriptor::TYPE_STRING &&
         field->type() != FieldDescriptor::TYPE_MESSAGE)) {
      if (!WireFormatLite::SkipField(&input, tag)) return Malformed(path);
      continue;
    }
    std::string field_path =
        path.empty() ? field->name() : absl::StrCat(path, ".", field->name());
    if (field->is_repeated()) {
      absl::StrAppend(&field_path, "[", occurrences[number]++, "]");
    }
    uint32_t length = 0;
    if (!input.ReadVarint32(&length)) return Malformed(field_path);
    if (field->type() == FieldDescriptor::TYPE_STRING) {
      std::string value;
      if (!input.ReadString(&value, static_cast<int>(length))) {
        return Malformed(field_path);
      }
      if (!IsValidUtf8(value)) {
        return absl::InvalidArgumentError(
            absl::StrCat(field_path, ": not valid UTF-8"));
      }
      continue;
    }
    if (depth >= kMaxDepth) return Malformed(field_path);
    const CodedInputStream::Limit limit =
        input.PushLimit(static_cast<int>(length));
    CACHEWATCH_RETURN_IF_ERROR(
        FindBadField(input, field->message_type(), field_path, depth + 1));
    if (input.BytesUntilLimit() != 0) return Malformed(field_path);
    input.PopLimit(limit);
  }
}

CodedInputStream InputOver(std::string_view bytes) {
  return CodedInputStream(reinterpret_cast<const uint8_t*>(bytes.data()),
                          static_cast<int>(bytes.size()));
}

}  // namespace

absl::Status DecodeMessage(std::string_view bytes,
                           google::protobuf::Message& message) {
  if (message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::OkStatus();
  }
  CodedInputStream input = InputOver(bytes);
  absl::Status bad = FindBadField(input, message.GetDescriptor(), "", 0);
  message.Clear();
  return bad.ok() ? Malformed("") : bad;
}

grpc::Slice SingleSlice(const grpc::ByteBuffer& buffer) {
  grpc::Slice slice;
  if (buffer.TrySingleSlice(&slice).ok()) return slice;
  if (!buffer.DumpToSingleSlice(&slice).ok()) return grpc::Slice();
  return slice;
}

bool DecodeSnapshotRecord(std::string_view bytes, v1::Snapshot& snapshot) {
  CodedInputStream input = InputOver(bytes);
  uint32_t length = 0;
  if (input.ReadTag() !=
          WireFormatLite::MakeTag(v1::RecordRequest::kSnapshotFieldNumber,
                                  WireFormatLite::WIRETYPE_LENGTH_DELIMITED) ||
      !input.ReadVarint32(&length)) {
    return false;
  }
  const size_t header = static_cast<size_t>(input.CurrentPosition());
  // Nothing may follow the snapshot (another field, a second snapshot to
  // merge): such requests take the general path.
  if (length != bytes.size() - header) return false;
  return snapshot.ParseFromArray(bytes.data() + header,
                                 static_cast<int>(length));
}

absl::Status DecodeMessage(const grpc::ByteBuffer& buffer,
                           google::protobuf::Message& message) {
  grpc::Slice slice;
  if (!buffer.DumpToSingleSlice(&slice).ok()) {
    message.Clear();
    return Malformed("");
  }
  return DecodeMessage(
      std::string_view(reinterpret_cast<const char*>(slice.begin()),
                       slice.size()),
      message);
}

RecordIdentity PeekRecordIdentity(std::string_view bytes) {
  RecordIdentity identity;
  CodedInputStream input = InputOver(bytes);
  for (uint32_t tag; (tag = input.ReadTag()) != 0;) {
    const int number = WireFormatLite::GetTagFieldNumber(tag);
    const bool record_field =
        number == v1::RecordRequest::kSnapshotFieldNumber ||
        number == v1::RecordRequest::kUsageFieldNumber;
    uint32_t length = 0;
    if (!record_field ||
        WireFormatLite::GetTagWireType(tag) !=
            WireFormatLite::WIRETYPE_LENGTH_DELIMITED ||
        !input.ReadVarint32(&length)) {
      if (!WireFormatLite::SkipField(&input, tag)) break;
      continue;
    }
    // The last record field wins, as when protobuf parses a oneof.
    identity.is_usage = number == v1::RecordRequest::kUsageFieldNumber;
    identity.request_id.clear();
    static_assert(static_cast<int>(v1::Snapshot::kRequestIdFieldNumber) ==
                  static_cast<int>(v1::Usage::kRequestIdFieldNumber));
    const CodedInputStream::Limit limit =
        input.PushLimit(static_cast<int>(length));
    for (uint32_t inner; (inner = input.ReadTag()) != 0;) {
      std::string value;
      if (inner == WireFormatLite::MakeTag(
                       v1::Snapshot::kRequestIdFieldNumber,
                       WireFormatLite::WIRETYPE_LENGTH_DELIMITED) &&
          WireFormatLite::ReadString(&input, &value)) {
        identity.request_id = IsValidUtf8(value) ? value : "";
      } else if (!WireFormatLite::SkipField(&input, inner)) {
        break;
      }
    }
    input.PopLimit(limit);
  }
  return identity;
}

}  // namespace cachewatch
