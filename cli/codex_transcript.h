// Reads a Codex CLI rollout (~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl)
// into turns, one per `token_count` event (docs/IMPORT.md "Codex CLI").
//
// Lines are {"timestamp", "type", "payload"}: `session_meta` gives the
// session id and CLI version, `turn_context` the model, `response_item`s
// the history (hashed into the message chain), `event_msg` of type
// `token_count` the usage of the request just answered
// (info.last_token_usage, else the difference of info.total_token_usage),
// and `compacted` a history replaced by its summary (a compaction hint).
// The request id is the session's cumulative token total at that event, so
// that the same event gets the same id on every import; an event repeating
// the previous totals is a duplicate.
//
// Not thread-safe; one reader per file.
#ifndef CACHEWATCH_CLI_CODEX_TRANSCRIPT_H_
#define CACHEWATCH_CLI_CODEX_TRANSCRIPT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/transcript.h"

namespace cachewatch::cli {

inline constexpr char kCodexAgent[] = "codex";

class CodexTranscript {
 public:
  // As ClaudeCodeTranscript's.
  CodexTranscript(std::string path, ReadTally& tally, SeenRequests& seen,
                  TurnSink sink);

  void Line(std::string_view line, int64_t number);

 private:
  struct Totals {
    int64_t input = 0;
    int64_t cached = 0;
    int64_t output = 0;
    int64_t reasoning = 0;
    int64_t total = 0;
    bool operator==(const Totals&) const = default;
  };

  const std::string path_;
  std::string session_id_;
  std::string model_;
  ReadTally& tally_;
  SeenRequests& seen_;
  const TurnSink sink_;
  uint64_t running_ = 0;
  std::vector<uint64_t> request_points_;
  std::optional<Totals> previous_totals_;
  bool compaction_pending_ = false;
  // Decided by the first session_meta, or the file name's once a
  // token_count was read; a later session_meta never moves the file's
  // requests.
  bool session_fixed_ = false;
};

}  // namespace cachewatch::cli

#endif  // CACHEWATCH_CLI_CODEX_TRANSCRIPT_H_
