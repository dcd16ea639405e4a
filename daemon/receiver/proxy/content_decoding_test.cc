#include "daemon/receiver/proxy/content_decoding.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <string>

namespace cachewatch {
namespace {

// `text` compressed with zlib: windowBits 15 + 16 gzip, 15 zlib, -15 raw.
std::string Deflate(const std::string& text, int window_bits) {
  z_stream stream{};
  deflateInit2(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, window_bits, 8,
               Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&stream, text.size()), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  stream.avail_in = text.size();
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = out.size();
  deflate(&stream, Z_FINISH);
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

const std::string kBody =
    R"({"id":"msg_1","usage":{"input_tokens":40,"cache_read_input_tokens":20000}})";

TEST(DecodeContentTest, IdentityIsUnchanged) {
  EXPECT_EQ(*DecodeContent("", kBody, 1 << 20), kBody);
  EXPECT_EQ(*DecodeContent("identity", kBody, 1 << 20), kBody);
}

TEST(DecodeContentTest, GzipAndBothKindsOfDeflate) {
  EXPECT_EQ(*DecodeContent("gzip", Deflate(kBody, 15 + 16), 1 << 20), kBody);
  EXPECT_EQ(*DecodeContent(" X-Gzip", Deflate(kBody, 15 + 16), 1 << 20), kBody);
  EXPECT_EQ(*DecodeContent("deflate", Deflate(kBody, 15), 1 << 20), kBody);
  EXPECT_EQ(*DecodeContent("deflate", Deflate(kBody, -15), 1 << 20), kBody);
}

TEST(DecodeContentTest, CorruptTruncatedUnknownAndOversized) {
  const std::string gzip = Deflate(kBody, 15 + 16);
  EXPECT_EQ(DecodeContent("gzip", "not gzip", 1 << 20).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeContent("gzip", gzip.substr(0, gzip.size() / 2), 1 << 20)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeContent("br", gzip, 1 << 20).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(DecodeContent("gzip, br", gzip, 1 << 20).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(DecodeContent("gzip", Deflate(std::string(100000, 'a'), 31), 1000)
                .status()
                .code(),
            absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace cachewatch
