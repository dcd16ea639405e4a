#include "cli/transcript_files.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "cli/claude_code_transcript.h"
#include "cli/codex_transcript.h"
#include "cli/gemini_transcript.h"
#include "cli/jsonl_lines.h"

namespace cachewatch::cli {
namespace {

namespace fs = std::filesystem;

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

bool IsSessionFile(TranscriptAgent agent, const fs::path& path) {
  const std::string extension = path.extension().string();
  if (agent != TranscriptAgent::kGemini) return extension == ".jsonl";
  if (extension != ".json" && extension != ".jsonl") return false;
  for (const fs::path& part : path.parent_path()) {
    if (part == "chats") return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<TranscriptAgent> ParseTranscriptAgent(std::string_view name) {
  if (name == "claude-code") return TranscriptAgent::kClaudeCode;
  if (name == "codex") return TranscriptAgent::kCodex;
  if (name == "gemini") return TranscriptAgent::kGemini;
  return absl::InvalidArgumentError(absl::StrCat(
      "agent: '", std::string(name), "' is not claude-code, codex or gemini"));
}

std::vector<std::string> DefaultTranscriptPaths(TranscriptAgent agent) {
  const std::string home = Env("HOME");
  switch (agent) {
    case TranscriptAgent::kClaudeCode: {
      if (const std::string dir = Env("CLAUDE_CONFIG_DIR"); !dir.empty()) {
        return {dir + "/projects"};
      }
      std::vector<std::string> paths;
      for (const std::string& candidate :
           {home + "/.claude/projects", home + "/.config/claude/projects"}) {
        std::error_code error;
        if (fs::is_directory(candidate, error)) paths.push_back(candidate);
      }
      if (paths.empty()) paths.push_back(home + "/.claude/projects");
      return paths;
    }
    case TranscriptAgent::kCodex: {
      const std::string codex_home = Env("CODEX_HOME");
      return {(codex_home.empty() ? home + "/.codex" : codex_home) +
              "/sessions"};
    }
    case TranscriptAgent::kGemini:
      return {home + "/.gemini/tmp"};
  }
  return {};
}

absl::StatusOr<std::vector<std::string>> FindTranscriptFiles(
    TranscriptAgent agent, const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const std::string& path : paths) {
    std::error_code error;
    const fs::file_status status = fs::status(path, error);
    if (error || !fs::exists(status)) {
      return absl::NotFoundError(
          absl::StrCat(path, ": no such file or directory"));
    }
    if (!fs::is_directory(status)) {
      files.push_back(path);
      continue;
    }
    for (fs::recursive_directory_iterator
             it(path, fs::directory_options::skip_permission_denied, error),
         end;
         !error && it != end; it.increment(error)) {
      if (it->is_regular_file(error) && IsSessionFile(agent, it->path())) {
        files.push_back(it->path().string());
      }
    }
    if (error) {
      return absl::UnavailableError(
          absl::StrCat(path, ": cannot list: ", error.message()));
    }
  }
  std::sort(files.begin(), files.end());
  files.erase(std::unique(files.begin(), files.end()), files.end());
  return files;
}

absl::Status ReadTranscriptFile(TranscriptAgent agent, const std::string& path,
                                ReadTally& tally, SeenRequests& seen,
                                const TurnSink& sink) {
  ++tally.files;
  switch (agent) {
    case TranscriptAgent::kClaudeCode: {
      ClaudeCodeTranscript reader(path, tally, seen, sink);
      return ForEachCompleteLine(path, tally,
                                 [&](std::string_view line, int64_t number) {
                                   reader.Line(line, number);
                                 });
    }
    case TranscriptAgent::kCodex: {
      CodexTranscript reader(path, tally, seen, sink);
      return ForEachCompleteLine(path, tally,
                                 [&](std::string_view line, int64_t number) {
                                   reader.Line(line, number);
                                 });
    }
    case TranscriptAgent::kGemini: {
      GeminiTranscript reader(path, tally, seen, sink);
      if (fs::path(path).extension() == ".json") return reader.ReadLegacyFile();
      return ForEachCompleteLine(path, tally,
                                 [&](std::string_view line, int64_t number) {
                                   reader.Line(line, number);
                                 });
    }
  }
  return absl::InternalError("unknown agent");
}

}  // namespace cachewatch::cli
