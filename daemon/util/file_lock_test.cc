#include "daemon/util/file_lock.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/util/file.h"
#include "daemon/util/temp_dir.h"

namespace cachewatch {
namespace {

TEST(FileLockTest, ASecondLockFailsNamingThePathAndTheHolder) {
  TempDir dir;
  const std::string path = dir.path() + "/db.lock";
  absl::StatusOr<FileLock> first = FileLock::Acquire(path);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::string> text = ReadFileToString(path);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, absl::StrCat(getpid(), "\n"));

  absl::StatusOr<FileLock> second = FileLock::Acquire(path);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(second.status().message(),
            absl::StrCat(path, " is locked by process ", getpid()));
}

TEST(FileLockTest, ReleasedWhenDestroyedAndNotWhenMovedFrom) {
  TempDir dir;
  const std::string path = dir.path() + "/db.lock";
  std::optional<FileLock> holder;
  {
    absl::StatusOr<FileLock> lock = FileLock::Acquire(path);
    ASSERT_TRUE(lock.ok()) << lock.status();
    holder.emplace(*std::move(lock));
  }  // The moved-from lock is destroyed here.
  EXPECT_EQ(FileLock::Acquire(path).status().code(),
            absl::StatusCode::kFailedPrecondition);
  holder.reset();
  EXPECT_TRUE(FileLock::Acquire(path).ok());
}

TEST(FileLockTest, AFileLeftByAnEndedHolderDoesNotLock) {
  TempDir dir;
  const std::string path = dir.path() + "/db.lock";
  {
    std::FILE* stale = std::fopen(path.c_str(), "w");
    ASSERT_NE(stale, nullptr);
    std::fputs("999999999\n", stale);
    std::fclose(stale);
  }
  absl::StatusOr<FileLock> lock = FileLock::Acquire(path);
  ASSERT_TRUE(lock.ok()) << lock.status();
  absl::StatusOr<std::string> text = ReadFileToString(path);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, absl::StrCat(getpid(), "\n"));
}

TEST(FileLockTest, AFileThatCannotBeCreatedIsAnErrorNamingIt) {
  TempDir dir;
  const std::string path = dir.path() + "/missing/db.lock";
  absl::StatusOr<FileLock> lock = FileLock::Acquire(path);
  EXPECT_EQ(lock.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(lock.status().message().find(path), std::string::npos)
      << lock.status();
}

}  // namespace
}  // namespace cachewatch
