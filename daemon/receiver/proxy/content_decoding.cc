#include "daemon/receiver/proxy/content_decoding.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>

namespace cachewatch {
namespace {

std::string Normalized(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c != ' ' && c != '\t') {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  return out;
}

// windowBits 15 + 32: a zlib or gzip stream, detected from its header;
// -15: raw deflate (what some servers send as "deflate").
absl::StatusOr<std::string> Inflate(std::string_view body, size_t max_bytes,
                                    int window_bits) {
  z_stream stream{};
  if (inflateInit2(&stream, window_bits) != Z_OK) {
    return absl::InternalError("inflateInit2 failed");
  }
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(body.data()));
  stream.avail_in = static_cast<uInt>(body.size());
  std::string out;
  char piece[16 * 1024];
  int result = Z_OK;
  while (result != Z_STREAM_END) {
    stream.next_out = reinterpret_cast<Bytef*>(piece);
    stream.avail_out = sizeof(piece);
    result = inflate(&stream, Z_NO_FLUSH);
    if (result != Z_OK && result != Z_STREAM_END) break;
    out.append(piece, sizeof(piece) - stream.avail_out);
    if (out.size() > max_bytes) {
      inflateEnd(&stream);
      return absl::ResourceExhaustedError("decoded response over the cap");
    }
    if (result == Z_OK && stream.avail_in == 0 && stream.avail_out != 0) {
      result = Z_BUF_ERROR;  // Truncated.
      break;
    }
  }
  inflateEnd(&stream);
  if (result != Z_STREAM_END) {
    return absl::InvalidArgumentError("corrupt or truncated compressed body");
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> DecodeContent(std::string_view encoding,
                                          std::string_view body,
                                          size_t max_bytes) {
  const std::string coding = Normalized(encoding);
  if (coding.empty() || coding == "identity") return std::string(body);
  if (coding == "gzip" || coding == "x-gzip") {
    return Inflate(body, max_bytes, 15 + 32);
  }
  if (coding == "deflate") {
    absl::StatusOr<std::string> zlib = Inflate(body, max_bytes, 15 + 32);
    if (zlib.ok() ||
        zlib.status().code() != absl::StatusCode::kInvalidArgument) {
      return zlib;
    }
    return Inflate(body, max_bytes, -15);
  }
  return absl::UnimplementedError("content-encoding '" + coding +
                                  "' is not decoded");
}

}  // namespace cachewatch
