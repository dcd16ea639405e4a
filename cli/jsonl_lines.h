// Reads a JSON-lines file line by line, in constant memory beyond the
// longest line, up to its last complete line: a trailing line without its
// newline is a line still being written, counted in the tally and left for
// the next read, never an error.
//
// Not thread-safe; one caller per file.
#ifndef CACHEWATCH_CLI_JSONL_LINES_H_
#define CACHEWATCH_CLI_JSONL_LINES_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "cli/transcript.h"

namespace cachewatch::cli {

// Calls `on_line` with each complete line of `path` (without its newline,
// nor a carriage return before it) and its 1-based number; empty lines are
// skipped. Adds the lines, their bytes and any partial last line to
// `tally`. Returns NotFound when the file cannot be opened, DataLoss when
// reading it fails; OK otherwise.
absl::Status ForEachCompleteLine(
    const std::string& path, ReadTally& tally,
    const std::function<void(std::string_view line, int64_t number)>& on_line);

}  // namespace cachewatch::cli

#endif  // CACHEWATCH_CLI_JSONL_LINES_H_
