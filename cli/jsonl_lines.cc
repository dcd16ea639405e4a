#include "cli/jsonl_lines.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"

namespace cachewatch::cli {
namespace {

constexpr size_t kChunkBytes = 1 << 20;

struct FileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};

}  // namespace

absl::Status ForEachCompleteLine(
    const std::string& path, ReadTally& tally,
    const std::function<void(std::string_view line, int64_t number)>& on_line) {
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (file == nullptr) {
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  std::vector<char> chunk(kChunkBytes);
  std::string carry;  // The start of a line the previous chunk cut.
  int64_t number = 0;
  auto emit = [&](std::string_view line) {
    ++number;
    ++tally.lines;
    tally.bytes += static_cast<int64_t>(line.size()) + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!line.empty()) on_line(line, number);
  };
  while (true) {
    const size_t got = std::fread(chunk.data(), 1, chunk.size(), file.get());
    if (got == 0) break;
    std::string_view data(chunk.data(), got);
    size_t start = 0;
    while (true) {
      const size_t newline = data.find('\n', start);
      if (newline == std::string_view::npos) break;
      if (carry.empty()) {
        emit(data.substr(start, newline - start));
      } else {
        carry.append(data.substr(start, newline - start));
        emit(carry);
        carry.clear();
      }
      start = newline + 1;
    }
    carry.append(data.substr(start));
  }
  if (std::ferror(file.get())) {
    return absl::DataLossError(
        absl::StrCat(path, ": read failed: ", std::strerror(errno)));
  }
  if (!carry.empty()) ++tally.partial_lines;
  return absl::OkStatus();
}

}  // namespace cachewatch::cli
