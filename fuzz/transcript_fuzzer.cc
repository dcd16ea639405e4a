// libFuzzer target: the session-log readers of `cachewatch import`
// (cli/claude_code_transcript.h, codex_transcript.h, gemini_transcript.h).
//
// Input: the first byte selects the reader (value % 3: Claude Code, Codex
// CLI, Gemini CLI JSONL); the rest is the file's bytes, fed line by line
// (split on '\n'; a last piece without its newline is, as in a real file, a
// partial line and not fed). An empty input is skipped.
//
// Invariants checked, beyond "no crash, no leak, no undefined behaviour":
//   - one turn per request tallied;
//   - each turn's snapshot and usage carry the same lane key and request
//     id, none empty, and a model; its normalized usage passes
//     ValidateNormalizedUsage with a prompt of at least one token;
//   - nothing a transcript lacks is invented: no tools, no system hash or
//     sections, no cache_control, no options hash;
//   - a request's message chain has at most one block per request read so
//     far;
//   - the same bytes read again by a fresh reader give the same turns;
//   - the same lines read again by the same reader (a re-import, or a
//     resumed session's copy) give no new turn.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/claude_code_transcript.h"
#include "cli/codex_transcript.h"
#include "cli/gemini_transcript.h"
#include "cli/transcript.h"
#include "daemon/core/usage_normalizer.h"
#include "fuzz/fuzz_check.h"

namespace {

using cachewatch::cli::ReadTally;
using cachewatch::cli::SeenRequests;
using cachewatch::cli::TranscriptTurn;
using cachewatch::cli::TurnSink;

std::vector<std::string_view> CompleteLines(std::string_view text) {
  std::vector<std::string_view> lines;
  for (size_t newline; (newline = text.find('\n')) != std::string_view::npos;
       text.remove_prefix(newline + 1)) {
    if (newline > 0) lines.push_back(text.substr(0, newline));
  }
  return lines;
}

// Feeds `lines` `passes` times to one reader of kind `agent`; returns each
// turn serialized, and the tally.
std::vector<std::string> Read(uint8_t agent,
                              const std::vector<std::string_view>& lines,
                              int passes, std::vector<size_t>* per_pass,
                              ReadTally& tally) {
  SeenRequests seen;
  std::vector<std::string> turns;
  const TurnSink sink = [&](TranscriptTurn turn) {
    const auto& snapshot = turn.snapshot;
    const auto& usage = turn.usage;
    FUZZ_CHECK(!snapshot.agent().empty() && !snapshot.session_id().empty() &&
               !snapshot.lane().empty() && !snapshot.request_id().empty() &&
               !snapshot.model().empty());
    FUZZ_CHECK(usage.agent() == snapshot.agent() &&
               usage.session_id() == snapshot.session_id() &&
               usage.lane() == snapshot.lane() &&
               usage.request_id() == snapshot.request_id());
    FUZZ_CHECK(cachewatch::ValidateNormalizedUsage(usage.normalized()).ok());
    FUZZ_CHECK(cachewatch::PromptTotalTokens(usage.normalized()) > 0);
    FUZZ_CHECK(snapshot.tools_size() == 0 && snapshot.system_hash() == 0 &&
               snapshot.system_sections_size() == 0 &&
               !snapshot.has_cache_control() && snapshot.options_hash() == 0);
    FUZZ_CHECK(snapshot.message_chain_size() <= tally.requests);
    turns.push_back(snapshot.SerializeAsString() + usage.SerializeAsString());
  };
  const std::string path = "fuzz/session.jsonl";
  auto feed = [&](auto& reader) {
    for (int pass = 0; pass < passes; ++pass) {
      int64_t number = 0;
      for (std::string_view line : lines) reader.Line(line, ++number);
      per_pass->push_back(turns.size());
    }
  };
  switch (agent % 3) {
    case 0: {
      cachewatch::cli::ClaudeCodeTranscript reader(path, tally, seen, sink);
      feed(reader);
      break;
    }
    case 1: {
      cachewatch::cli::CodexTranscript reader(path, tally, seen, sink);
      feed(reader);
      break;
    }
    default: {
      cachewatch::cli::GeminiTranscript reader(path, tally, seen, sink);
      feed(reader);
      break;
    }
  }
  FUZZ_CHECK(tally.requests == static_cast<int64_t>(turns.size()));
  return turns;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::vector<std::string_view> lines = CompleteLines(
      std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
  std::vector<size_t> once_counts;
  ReadTally once_tally;
  const std::vector<std::string> once =
      Read(data[0], lines, 1, &once_counts, once_tally);
  std::vector<size_t> twice_counts;
  ReadTally twice_tally;
  const std::vector<std::string> twice =
      Read(data[0], lines, 2, &twice_counts, twice_tally);
  FUZZ_CHECK(twice_counts.size() == 2);
  FUZZ_CHECK(twice_counts[0] == once.size() && twice_counts[1] == once.size());
  FUZZ_CHECK(std::vector<std::string>(twice.begin(),
                                      twice.begin() + twice_counts[0]) == once);
  return 0;
}
