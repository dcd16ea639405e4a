// Reads a Gemini CLI chat recording (~/.gemini/tmp/<project>/chats/) into
// turns, one per model message that reports its tokens (docs/IMPORT.md
// "Gemini CLI"). Two layouts:
//
// - session-*.jsonl (current): a metadata line {sessionId, projectHash,
//   kind, ...}, then message records (re-appended whole, same id, whenever
//   one changes, e.g. when its tokens arrive), {"$rewindTo": id} (history
//   cut before that message) and {"$set": {...}} (metadata; a "messages"
//   member replaces the whole history, as compression does);
// - session-*.json (before): one object {sessionId, ..., messages: [...]},
//   read message by message (never whole).
//
// Messages are {id, timestamp, type: "user" | "gemini" | "info" | ...,
// content, tokens: {input, output, cached, thoughts, tool, total}, model};
// a "gemini" message's tokens are the usage of the request that produced
// it, whose prompt is the history before it. Subagent recordings (kind
// "subagent", under chats/<parent session>/) are a lane of the parent's
// session.
//
// Not thread-safe; one reader per file.
#ifndef CACHEWATCH_CLI_GEMINI_TRANSCRIPT_H_
#define CACHEWATCH_CLI_GEMINI_TRANSCRIPT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"
#include "cli/transcript.h"
#include "nlohmann/json.hpp"

namespace cachewatch::cli {

inline constexpr char kGeminiAgent[] = "gemini-cli";

class GeminiTranscript {
 public:
  // As ClaudeCodeTranscript's.
  GeminiTranscript(std::string path, ReadTally& tally, SeenRequests& seen,
                   TurnSink sink);

  // One line of a session-*.jsonl recording.
  void Line(std::string_view line, int64_t number);

  // The whole of a session-*.json recording, streamed. Fails only when the
  // file cannot be opened; a malformed file keeps what was read before the
  // fault and counts it as a corrupt line.
  absl::Status ReadLegacyFile();

 private:
  struct Message {
    std::string id;
    uint64_t hash = 0;  // Of its type and content.
    bool prompt_end = false;
  };

  void Metadata(const nlohmann::json& record);
  void AddMessage(const nlohmann::json& message, int64_t number);
  void Rewind(const std::string& id);
  void ReplaceMessages(const nlohmann::json& messages);

  const std::string path_;
  std::string session_id_;
  std::string lane_ = "main";
  ReadTally& tally_;
  SeenRequests& seen_;
  const TurnSink sink_;
  std::vector<Message> history_;
  std::unordered_map<std::string, size_t> index_by_id_;
  bool compaction_pending_ = false;
  // The file's session and lane are decided by its first metadata record,
  // or are the file name's once a message was read: a later record (a
  // resume rewrites the session id) never moves the file's requests.
  bool session_fixed_ = false;
};

}  // namespace cachewatch::cli

#endif  // CACHEWATCH_CLI_GEMINI_TRANSCRIPT_H_
