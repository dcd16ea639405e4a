#include "daemon/util/file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "daemon/util/temp_dir.h"

namespace cachewatch {
namespace {

TEST(ReadFileToStringTest, ReadsTheWholeFile) {
  TempDir dir;
  const std::string path = dir.path() + "/cert.pem";
  std::ofstream(path, std::ios::binary) << std::string("PEM\0data\n", 9);
  absl::StatusOr<std::string> text = ReadFileToString(path);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, std::string("PEM\0data\n", 9));
}

TEST(ReadFileToStringTest, AnEmptyFileIsEmpty) {
  TempDir dir;
  const std::string path = dir.path() + "/empty";
  std::ofstream{path};
  absl::StatusOr<std::string> text = ReadFileToString(path);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "");
}

TEST(ReadFileToStringTest, AMissingFileIsNotFoundAndNamed) {
  TempDir dir;
  const std::string path = dir.path() + "/missing.pem";
  absl::StatusOr<std::string> text = ReadFileToString(path);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(text.status().message().find(path), std::string::npos);
}

TEST(ReadFileToStringTest, AnUnreadableFileIsPermissionDenied) {
  if (geteuid() == 0) GTEST_SKIP() << "root reads any file";
  TempDir dir;
  const std::string path = dir.path() + "/key.pem";
  std::ofstream(path) << "secret";
  ASSERT_EQ(chmod(path.c_str(), 0), 0);
  absl::StatusOr<std::string> text = ReadFileToString(path);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(text.status().message().find(path), std::string::npos);
}

TEST(ReadFileToStringTest, ADirectoryIsAnError) {
  TempDir dir;
  absl::StatusOr<std::string> text = ReadFileToString(dir.path());
  EXPECT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find(dir.path()), std::string::npos);
}

}  // namespace
}  // namespace cachewatch
