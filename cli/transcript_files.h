// Where `cachewatch import` finds an agent's session logs, and which reader
// reads each file.
//
// Thread-compatible: the functions share no state.
#ifndef CACHEWATCH_CLI_TRANSCRIPT_FILES_H_
#define CACHEWATCH_CLI_TRANSCRIPT_FILES_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cli/transcript.h"

namespace cachewatch::cli {

enum class TranscriptAgent { kClaudeCode, kCodex, kGemini };

// "claude-code", "codex" or "gemini"; InvalidArgument otherwise.
absl::StatusOr<TranscriptAgent> ParseTranscriptAgent(std::string_view name);

// Where the agent keeps its logs: Claude Code $CLAUDE_CONFIG_DIR/projects,
// else ~/.claude/projects and ~/.config/claude/projects (those that exist);
// Codex $CODEX_HOME/sessions, else ~/.codex/sessions; Gemini ~/.gemini/tmp.
std::vector<std::string> DefaultTranscriptPaths(TranscriptAgent agent);

// The agent's session files under `paths`, sorted: a file is taken as
// given, a directory is walked recursively (Claude Code and Codex: *.jsonl;
// Gemini: *.json and *.jsonl under a chats/ directory). NotFound names a
// path that does not exist.
absl::StatusOr<std::vector<std::string>> FindTranscriptFiles(
    TranscriptAgent agent, const std::vector<std::string>& paths);

// Reads `path` with the agent's reader up to its last complete line,
// adding what it read to `tally` and each request's turn to `sink`. Fails
// only when the file cannot be read.
absl::Status ReadTranscriptFile(TranscriptAgent agent, const std::string& path,
                                ReadTally& tally, SeenRequests& seen,
                                const TurnSink& sink);

}  // namespace cachewatch::cli

#endif  // CACHEWATCH_CLI_TRANSCRIPT_FILES_H_
