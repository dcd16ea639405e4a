// What every transcript reader of `cachewatch import` shares: the turn it
// makes of one model request found in an agent's session log, the tally of
// what it read and skipped, and the message chain it hashes from the
// transcript's own message content.
//
// A transcript records the messages and each response's usage, never the
// tools or the system prompt: a TranscriptTurn's snapshot leaves them empty
// (the same, unknown, on every turn), so that the classifier never finds a
// tool or system change in them (docs/IMPORT.md).
//
// Plain values; not thread-safe.
#ifndef CACHEWATCH_CLI_TRANSCRIPT_H_
#define CACHEWATCH_CLI_TRANSCRIPT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "absl/status/statusor.h"
#include "cachewatch/v1/snapshot.pb.h"
#include "cachewatch/v1/usage.pb.h"

namespace cachewatch::cli {

// One model request of a transcript: its snapshot (lane key, request id and
// time, provider, model, message chain, a compaction hint) and its usage
// (raw as the agent logged it, and normalized).
struct TranscriptTurn {
  v1::Snapshot snapshot;
  v1::Usage usage;
};

// What a reader found of one request.
struct RequestFields {
  std::string agent;  // "claude-code", "codex", "gemini-cli".
  std::string session_id;
  std::string lane;  // "main", a subagent's lane.
  std::string request_id;
  int64_t time_us = 0;
  v1::Provider provider = v1::PROVIDER_UNSPECIFIED;
  std::string model;
  std::vector<uint64_t> message_chain;
  v1::ExpectedDrop expected_drop = v1::EXPECTED_DROP_UNSPECIFIED;
  // The provider's usage object as the agent logged it (or rebuilt in the
  // provider's shape from the agent's own field names).
  std::string raw_usage_json;
};

// The turn of `fields`, its usage normalized by the daemon's own
// normalizer. InvalidArgument (from the normalizer) when the usage cannot
// be read; FailedPrecondition when it counts no prompt token at all (an
// aborted request), which would be no baseline for the next turn.
absl::StatusOr<TranscriptTurn> MakeTurn(RequestFields fields);

using TurnSink = std::function<void(TranscriptTurn turn)>;

// The requests already turned into turns in this import, by agent and the
// agent's own request identity, so that a request logged twice (on several
// lines, or copied into a resumed session) is counted once. Keeps 8 bytes
// (an XXH3-64 hash) per request.
class SeenRequests {
 public:
  // True the first time `identity` is seen for `agent`.
  bool Insert(std::string_view agent, std::string_view identity);

 private:
  std::unordered_set<uint64_t> hashes_;
};

// What the readers read, and what they skipped and why.
struct ReadTally {
  int64_t files = 0;
  int64_t bytes = 0;     // Of complete lines read.
  int64_t lines = 0;     // Complete lines read.
  int64_t requests = 0;  // Turns produced.
  // Lines that are not JSON (truncated or corrupt); each is skipped.
  int64_t corrupt_lines = 0;
  // Trailing lines without their newline (a file still being written): not
  // read this time.
  int64_t partial_lines = 0;
  // Request lines already seen (one request spans several lines, or a
  // resumed session copied it).
  int64_t duplicate_requests = 0;
  // What was skipped, by kind: "unknown type: foo", "no usage", ...
  std::map<std::string, int64_t> skipped;
  // "path:line: problem" of the first few unreadable lines.
  std::vector<std::string> first_problems;

  // Lines by the agent version they carry ("claude-code 2.0.14").
  std::map<std::string, int64_t> versions;

  void Skip(const std::string& kind) { ++skipped[kind]; }
  void Problem(std::string_view path, int64_t line, std::string_view what);
};

// What a reader of one transcript file is given: the file's path (named in
// problems), the session id its name gives (the file name without its
// extension), the import's tally and seen requests, and the sink of its
// turns. `tally` and `seen` must outlive it.
struct TranscriptContext {
  TranscriptContext(std::string path, ReadTally& tally, SeenRequests& seen,
                    TurnSink sink);

  // Counts line `number` as corrupt (not a JSON object) and names it among
  // the problems.
  void CorruptLine(int64_t number);

  // Ends line `number`, a request, with the turn MakeTurn made of it: a turn
  // is counted and given to the sink (true); a failure is skipped as
  // "<agent>: request with no prompt tokens" (FailedPrecondition) or as
  // "<agent>: <unreadable>" (the normalizer's InvalidArgument, also named
  // among the problems), and false tells the reader to undo what the request
  // marked.
  bool EmitTurn(absl::StatusOr<TranscriptTurn> turn, int64_t number,
                std::string_view agent, std::string_view unreadable);

  const std::string path;
  const std::string file_session_id;
  ReadTally& tally;
  SeenRequests& seen;
  const TurnSink sink;
};

// The message chain of a transcript's requests. Every message (a transcript
// entry's content) advances a running XXH3-64 hash; a request's chain holds
// that running hash at the end of each earlier request's prompt on its
// path, and at the end of its own. Growing history thus adds one block per
// request (no breakpoint lookback is ever implied), and a rewritten message
// changes every block from its request on (messages_changed).
uint64_t ChainStep(uint64_t running, std::string_view message);

// Parses RFC 3339 ("2025-08-01T12:34:56.789Z", an offset allowed) into
// microseconds since the epoch; false when it is not one.
bool ParseTimestampMicros(std::string_view text, int64_t* micros);

}  // namespace cachewatch::cli

#endif  // CACHEWATCH_CLI_TRANSCRIPT_H_
