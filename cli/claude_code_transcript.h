// Reads a Claude Code session log (~/.claude/projects/<project>/<session>.jsonl
// and, for subagents, <session>/subagents/agent-<id>.jsonl) into turns, one
// per model request (docs/IMPORT.md "Claude Code").
//
// Entries form a tree by uuid / parentUuid; a request's prompt is the path
// from the root to its first line's parent. One response is logged as one
// line per content block, all with the same requestId and message.id: the
// first is the request, the rest are duplicates (as ccusage counts them).
// Sidechain (subagent) entries get a lane of their own; a compact boundary
// or compact summary marks the lane's next request as a compaction.
//
// Lines are parsed with simdjson's On-Demand API (JSON parsing was most of
// the import's time with nlohmann-json: bench/import_bench.cc).
//
// Not thread-safe; one reader per file.
#ifndef CACHEWATCH_CLI_CLAUDE_CODE_TRANSCRIPT_H_
#define CACHEWATCH_CLI_CLAUDE_CODE_TRANSCRIPT_H_

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cli/transcript.h"
#include "simdjson.h"

namespace cachewatch::cli {

inline constexpr char kClaudeCodeAgent[] = "claude-code";

class ClaudeCodeTranscript {
 public:
  // `path` names the file in problems and gives the session id when the
  // entries carry none. `tally`, `seen` and `sink` must outlive the reader.
  ClaudeCodeTranscript(std::string path, ReadTally& tally, SeenRequests& seen,
                       TurnSink sink);

  // Reads one line; never fails (what it cannot read is tallied).
  void Line(std::string_view line, int64_t number);

 private:
  struct Node {
    int32_t parent = -1;
    int32_t root = 0;
    uint64_t running = 0;     // Chain hash up to and including this entry.
    bool prompt_end = false;  // Some request's prompt ended here.
  };

  // The request chain ending at `prompt_end` (see ChainStep).
  std::vector<uint64_t> ChainTo(int32_t prompt_end);

  const std::string path_;
  const std::string file_session_id_;
  ReadTally& tally_;
  SeenRequests& seen_;
  const TurnSink sink_;
  std::vector<Node> nodes_;
  std::unordered_map<std::string, int32_t> node_by_uuid_;
  std::unordered_map<int32_t, std::string> root_uuid_;
  std::set<std::string> compaction_pending_;  // Lanes.
  simdjson::ondemand::parser parser_;
  std::string buffer_;  // The line being read, with simdjson's padding.
};

}  // namespace cachewatch::cli

#endif  // CACHEWATCH_CLI_CLAUDE_CODE_TRANSCRIPT_H_
