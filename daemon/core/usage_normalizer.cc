#include "daemon/core/usage_normalizer.h"

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "daemon/core/provider_table.h"
#include "daemon/core/provider_usage.h"
#include "daemon/util/status_macros.h"

namespace cachewatch {
namespace {

using Json = nlohmann::json;

// Field names are absl::string_view in this file: Debian's Abseil has its own
// string_view type, the one absl::StrCat and absl::StrSplit take.

absl::Status RawError(absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("raw_usage_json: ", message));
}

absl::Status FieldError(absl::string_view field, absl::string_view problem) {
  return RawError(absl::StrCat(field, " ", problem));
}

absl::Status MissingField(absl::string_view api, absl::string_view what) {
  return RawError(absl::StrCat(api, " usage needs ", what));
}

// A SAX handler that accepts every event and records where the parser failed;
// it locates the error the DOM parser (without exceptions) does not report.
class ErrorLocator final : public Json::json_sax_t {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(Json::number_integer_t) override { return true; }
  bool number_unsigned(Json::number_unsigned_t) override { return true; }
  bool number_float(Json::number_float_t, const Json::string_t&) override {
    return true;
  }
  bool string(Json::string_t&) override { return true; }
  bool binary(Json::binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(Json::string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t position, const std::string&,
                   const Json::exception&) override {
    position_ = position;
    return false;
  }

  std::size_t position() const { return position_; }

 private:
  std::size_t position_ = 0;
};

// Parses `text` into `*root`, which must be a JSON object.
absl::Status ParseObject(std::string_view text, Json* root) {
  *root = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root->is_discarded()) {
    ErrorLocator locator;
    Json::sax_parse(text, &locator);
    return RawError(
        absl::StrCat("malformed JSON at byte ", locator.position()));
  }
  if (!root->is_object()) {
    return RawError(
        absl::StrCat("is a JSON ", root->type_name(), ", not an object"));
  }
  return absl::OkStatus();
}

// The member `key` of `object`; nullptr when `object` is not an object, or
// the member is absent or null.
const Json* Member(const Json& object, absl::string_view key) {
  const auto it = object.find(std::string_view(key.data(), key.size()));
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

// `root[wrapper]` for the first `wrapper` naming an object inside `root` (a
// whole response was sent), else `root` (the usage object itself).
const Json& Unwrap(const Json& root,
                   std::initializer_list<absl::string_view> wrappers) {
  for (absl::string_view wrapper : wrappers) {
    const Json* inner = Member(root, wrapper);
    if (inner != nullptr && inner->is_object()) return *inner;
  }
  return root;
}

// Whether `object` holds a non-null `key`.
bool Has(const Json& object, absl::string_view key) {
  return Member(object, key) != nullptr;
}

// `value` as a token count named `field` in errors: an integer (not a float,
// not a string) in [0, kMaxTokenCount].
absl::StatusOr<int64_t> ParseCount(const Json& value, absl::string_view field) {
  if (!value.is_number_integer()) return FieldError(field, "is not an integer");
  if (value.is_number_unsigned()) {
    const uint64_t count = value.get<uint64_t>();
    if (count > static_cast<uint64_t>(kMaxTokenCount)) {
      return FieldError(
          field, absl::StrCat("exceeds ", kMaxTokenCount, " (", count, ")"));
    }
    return static_cast<int64_t>(count);
  }
  const int64_t count = value.get<int64_t>();
  if (count < 0) {
    return FieldError(field, absl::StrCat("is negative (", count, ")"));
  }
  return count;
}

// Reads token counts from one usage object by dotted path
// ("prompt_tokens_details.cached_tokens"); an absent or null field reads as
// absent. Keeps the first error; after one, every read returns 0 / nullopt,
// so a caller reads all it needs and checks status() once.
class CountReader {
 public:
  // `api` names the usage format in "<api> usage needs <field>" errors.
  CountReader(const Json& usage, absl::string_view api)
      : usage_(usage), api_(api) {}

  std::optional<int64_t> Find(absl::string_view path) {
    const Json* value = Lookup(path);
    if (value == nullptr) return std::nullopt;
    absl::StatusOr<int64_t> count = ParseCount(*value, path);
    if (!count.ok()) {
      Fail(count.status());
      return std::nullopt;
    }
    return *count;
  }

  // The count at `path`, 0 when absent.
  int64_t Get(absl::string_view path) { return Find(path).value_or(0); }

  // The count at `path`; an error when absent.
  int64_t Require(absl::string_view path) {
    if (std::optional<int64_t> count = Find(path)) return *count;
    Fail(MissingField(api_, path));
    return 0;
  }

  // The value at `path`, nullptr when absent or null.
  const Json* Lookup(absl::string_view path) {
    const Json* node = &usage_;
    for (absl::string_view key : absl::StrSplit(path, '.')) {
      if (!node->is_object()) {
        const absl::string_view parent =
            path.substr(0, static_cast<size_t>(key.data() - path.data()) - 1);
        Fail(FieldError(parent, "is not an object"));
        return nullptr;
      }
      node = Member(*node, key);
      if (node == nullptr) return nullptr;
    }
    return node;
  }

  // Records `status` unless an error is recorded already.
  void Fail(absl::Status status) {
    if (status_.ok()) status_ = std::move(status);
  }

  const absl::Status& status() const { return status_; }

 private:
  const Json& usage_;
  const absl::string_view api_;
  absl::Status status_;
};

// The canonical counts, before they become a message.
struct Counts {
  int64_t uncached = 0;
  int64_t read = 0;
  int64_t write = 0;
  int64_t write_5m = 0;
  int64_t write_1h = 0;
  int64_t output = 0;
};

absl::StatusOr<v1::NormalizedUsage> Finish(const Counts& counts) {
  v1::NormalizedUsage usage;
  usage.set_uncached_input_tokens(counts.uncached);
  usage.set_cache_read_tokens(counts.read);
  usage.set_cache_write_tokens(counts.write);
  usage.set_cache_write_5m_tokens(counts.write_5m);
  usage.set_cache_write_1h_tokens(counts.write_1h);
  usage.set_output_tokens(counts.output);
  // Sums of accepted counts (TTL splits, cacheDetails) may still be too big.
  if (absl::Status status = ValidateNormalizedUsage(usage); !status.ok()) {
    return RawError(status.message());
  }
  return usage;
}

// Checks that `total` (a count that includes `part`) is not smaller than it.
absl::Status CheckIncludes(absl::string_view total_field, int64_t total,
                           absl::string_view part_field, int64_t part) {
  if (total >= part) return absl::OkStatus();
  return RawError(absl::StrCat(total_field, " (", total, ") is less than ",
                               part_field, " (", part, ")"));
}

// Anthropic Messages, and Kimi's Anthropic-compatible endpoint: input_tokens
// excludes cache reads and writes. The TTL split may be absent or all zero
// while cache_creation_input_tokens > 0 (web_search turns); the total stands.
absl::StatusOr<v1::NormalizedUsage> NormalizeAnthropicStyle(
    const Json& usage, absl::string_view api) {
  CountReader reader(usage, api);
  Counts counts;
  counts.uncached = reader.Require("input_tokens");
  counts.read = reader.Get("cache_read_input_tokens");
  const std::optional<int64_t> creation =
      reader.Find("cache_creation_input_tokens");
  counts.write_5m = reader.Get("cache_creation.ephemeral_5m_input_tokens");
  counts.write_1h = reader.Get("cache_creation.ephemeral_1h_input_tokens");
  counts.output = reader.Get("output_tokens");
  CACHEWATCH_RETURN_IF_ERROR(reader.status());
  const int64_t split = counts.write_5m + counts.write_1h;
  counts.write = creation.value_or(split);
  CACHEWATCH_RETURN_IF_ERROR(
      CheckIncludes("cache_creation_input_tokens", counts.write,
                    "cache_creation.ephemeral_5m_input_tokens + "
                    "cache_creation.ephemeral_1h_input_tokens",
                    split));
  return Finish(counts);
}

}  // namespace

absl::StatusOr<v1::NormalizedUsage> NormalizeAnthropic(const Json& root) {
  return NormalizeAnthropicStyle(Unwrap(root, {"usage"}), "anthropic");
}

namespace {

// Adds Bedrock's cacheDetails[] {ttl, inputTokens} to the TTL split of
// `counts` ("5m", "1h"; entries of another TTL join no split); returns the
// sum over all entries, whatever their TTL.
absl::StatusOr<int64_t> AddCacheDetails(const Json& details, Counts* counts) {
  if (!details.is_array()) return FieldError("cacheDetails", "is not an array");
  int64_t total = 0;
  for (std::size_t i = 0; i < details.size(); ++i) {
    const Json& entry = details[i];
    const std::string field = absl::StrCat("cacheDetails[", i, "]");
    if (!entry.is_object()) return FieldError(field, "is not an object");
    const std::string tokens_field = field + ".inputTokens";
    const Json* tokens_value = Member(entry, "inputTokens");
    if (tokens_value == nullptr) return MissingField("bedrock", tokens_field);
    CACHEWATCH_ASSIGN_OR_RETURN(int64_t tokens,
                                ParseCount(*tokens_value, tokens_field));
    total += tokens;
    const Json* ttl = Member(entry, "ttl");
    if (ttl == nullptr) continue;
    if (*ttl == "5m") counts->write_5m += tokens;
    if (*ttl == "1h") counts->write_1h += tokens;
  }
  return total;
}

}  // namespace

// Bedrock Converse: inputTokens excludes cache reads and writes.
absl::StatusOr<v1::NormalizedUsage> NormalizeBedrock(const Json& root) {
  const Json& usage = Unwrap(root, {"usage"});
  CountReader reader(usage, "bedrock");
  Counts counts;
  counts.uncached = reader.Require("inputTokens");
  counts.read = reader.Get("cacheReadInputTokens");
  const std::optional<int64_t> write = reader.Find("cacheWriteInputTokens");
  counts.output = reader.Get("outputTokens");
  const Json* details = reader.Lookup("cacheDetails");
  CACHEWATCH_RETURN_IF_ERROR(reader.status());
  int64_t details_total = 0;
  if (details != nullptr) {
    CACHEWATCH_ASSIGN_OR_RETURN(int64_t total,
                                AddCacheDetails(*details, &counts));
    details_total = total;
  }
  counts.write = write.value_or(details_total);
  CACHEWATCH_RETURN_IF_ERROR(
      CheckIncludes("cacheWriteInputTokens", counts.write,
                    "cacheDetails[].inputTokens", details_total));
  return Finish(counts);
}

namespace {

// OpenAI Chat Completions: prompt_tokens includes the cached tokens.
absl::StatusOr<v1::NormalizedUsage> NormalizeOpenAiChat(const Json& usage) {
  CountReader reader(usage, "openai");
  const int64_t prompt = reader.Require("prompt_tokens");
  Counts counts;
  counts.read = reader.Get("prompt_tokens_details.cached_tokens");
  counts.output = reader.Get("completion_tokens");
  CACHEWATCH_RETURN_IF_ERROR(reader.status());
  CACHEWATCH_RETURN_IF_ERROR(
      CheckIncludes("prompt_tokens", prompt,
                    "prompt_tokens_details.cached_tokens", counts.read));
  counts.uncached = prompt - counts.read;
  return Finish(counts);
}

// OpenAI Responses: input_tokens includes the cached tokens and, on Azure,
// the cache writes.
absl::StatusOr<v1::NormalizedUsage> NormalizeOpenAiResponses(
    const Json& usage) {
  CountReader reader(usage, "openai");
  const int64_t input = reader.Require("input_tokens");
  Counts counts;
  counts.read = reader.Get("input_tokens_details.cached_tokens");
  counts.write = reader.Get("input_tokens_details.cache_write_tokens");
  counts.output = reader.Get("output_tokens");
  CACHEWATCH_RETURN_IF_ERROR(reader.status());
  CACHEWATCH_RETURN_IF_ERROR(
      CheckIncludes("input_tokens", input,
                    "input_tokens_details.cached_tokens + "
                    "input_tokens_details.cache_write_tokens",
                    counts.read + counts.write));
  counts.uncached = input - counts.read - counts.write;
  return Finish(counts);
}

}  // namespace

absl::StatusOr<v1::NormalizedUsage> NormalizeOpenAi(const Json& root) {
  const Json& usage = Unwrap(root, {"usage"});
  if (Has(usage, "prompt_tokens")) return NormalizeOpenAiChat(usage);
  if (Has(usage, "input_tokens")) return NormalizeOpenAiResponses(usage);
  return MissingField(
      "openai", "prompt_tokens (Chat Completions) or input_tokens (Responses)");
}

namespace {

// Gemini's field names: REST camelCase or SDK snake_case.
struct GeminiFields {
  absl::string_view prompt;
  absl::string_view cached;
  absl::string_view candidates;
  absl::string_view thoughts;
};

constexpr GeminiFields kGeminiCamelCase = {
    "promptTokenCount", "cachedContentTokenCount", "candidatesTokenCount",
    "thoughtsTokenCount"};
constexpr GeminiFields kGeminiSnakeCase = {
    "prompt_token_count", "cached_content_token_count",
    "candidates_token_count", "thoughts_token_count"};

}  // namespace

// Gemini / Vertex: promptTokenCount includes the cached tokens; thoughts are
// output.
absl::StatusOr<v1::NormalizedUsage> NormalizeGemini(const Json& root) {
  const Json& usage = Unwrap(root, {"usageMetadata", "usage_metadata"});
  const GeminiFields& fields =
      Has(usage, kGeminiSnakeCase.prompt) ? kGeminiSnakeCase : kGeminiCamelCase;
  CountReader reader(usage, "gemini");
  const int64_t prompt = reader.Require(fields.prompt);
  Counts counts;
  counts.read = reader.Get(fields.cached);
  counts.output = reader.Get(fields.candidates) + reader.Get(fields.thoughts);
  CACHEWATCH_RETURN_IF_ERROR(reader.status());
  CACHEWATCH_RETURN_IF_ERROR(
      CheckIncludes(fields.prompt, prompt, fields.cached, counts.read));
  counts.uncached = prompt - counts.read;
  return Finish(counts);
}

// DashScope (OpenAI-compatible): prompt_tokens includes the cached tokens and
// the explicit-cache writes.
absl::StatusOr<v1::NormalizedUsage> NormalizeDashScope(const Json& root) {
  CountReader reader(Unwrap(root, {"usage"}), "dashscope");
  const int64_t prompt = reader.Require("prompt_tokens");
  Counts counts;
  counts.read = reader.Get("prompt_tokens_details.cached_tokens");
  const std::optional<int64_t> creation =
      reader.Find("prompt_tokens_details.cache_creation_input_tokens");
  counts.write_5m = reader.Get(
      "prompt_tokens_details.cache_creation.ephemeral_5m_input_tokens");
  counts.output = reader.Get("completion_tokens");
  CACHEWATCH_RETURN_IF_ERROR(reader.status());
  counts.write = creation.value_or(counts.write_5m);
  CACHEWATCH_RETURN_IF_ERROR(CheckIncludes(
      "prompt_tokens_details.cache_creation_input_tokens", counts.write,
      "prompt_tokens_details.cache_creation.ephemeral_5m_input_tokens",
      counts.write_5m));
  CACHEWATCH_RETURN_IF_ERROR(
      CheckIncludes("prompt_tokens", prompt,
                    "prompt_tokens_details.cached_tokens + "
                    "prompt_tokens_details.cache_creation_input_tokens",
                    counts.read + counts.write));
  counts.uncached = prompt - counts.read - counts.write;
  return Finish(counts);
}

// DeepSeek: prompt_tokens = prompt_cache_hit_tokens + prompt_cache_miss_tokens.
absl::StatusOr<v1::NormalizedUsage> NormalizeDeepSeek(const Json& root) {
  CountReader reader(Unwrap(root, {"usage"}), "deepseek");
  Counts counts;
  counts.read = reader.Require("prompt_cache_hit_tokens");
  const std::optional<int64_t> miss = reader.Find("prompt_cache_miss_tokens");
  const std::optional<int64_t> prompt = reader.Find("prompt_tokens");
  counts.output = reader.Get("completion_tokens");
  CACHEWATCH_RETURN_IF_ERROR(reader.status());
  if (miss.has_value()) {
    if (prompt.has_value() && *prompt != counts.read + *miss) {
      return RawError(absl::StrCat("prompt_cache_hit_tokens (", counts.read,
                                   ") + prompt_cache_miss_tokens (", *miss,
                                   ") != prompt_tokens (", *prompt, ")"));
    }
    counts.uncached = *miss;
    return Finish(counts);
  }
  if (!prompt.has_value()) {
    return MissingField("deepseek",
                        "prompt_cache_miss_tokens or prompt_tokens");
  }
  CACHEWATCH_RETURN_IF_ERROR(CheckIncludes(
      "prompt_tokens", *prompt, "prompt_cache_hit_tokens", counts.read));
  counts.uncached = *prompt - counts.read;
  return Finish(counts);
}

namespace {

// Kimi, OpenAI-compatible: prompt_tokens includes cached_tokens, reported at
// the top level or under prompt_tokens_details.
absl::StatusOr<v1::NormalizedUsage> NormalizeKimiOpenAiStyle(
    const Json& usage) {
  CountReader reader(usage, "kimi");
  const int64_t prompt = reader.Require("prompt_tokens");
  const std::optional<int64_t> top = reader.Find("cached_tokens");
  const std::optional<int64_t> details =
      reader.Find("prompt_tokens_details.cached_tokens");
  Counts counts;
  counts.output = reader.Get("completion_tokens");
  CACHEWATCH_RETURN_IF_ERROR(reader.status());
  if (top.has_value() && details.has_value() && *top != *details) {
    return RawError(absl::StrCat("cached_tokens (", *top,
                                 ") differs from "
                                 "prompt_tokens_details.cached_tokens (",
                                 *details, ")"));
  }
  counts.read = top.value_or(details.value_or(0));
  CACHEWATCH_RETURN_IF_ERROR(CheckIncludes(
      "prompt_tokens", prompt,
      top.has_value() ? "cached_tokens" : "prompt_tokens_details.cached_tokens",
      counts.read));
  counts.uncached = prompt - counts.read;
  return Finish(counts);
}

}  // namespace

absl::StatusOr<v1::NormalizedUsage> NormalizeKimi(const Json& root) {
  const Json& usage = Unwrap(root, {"usage"});
  if (Has(usage, "prompt_tokens")) return NormalizeKimiOpenAiStyle(usage);
  if (Has(usage, "input_tokens")) return NormalizeAnthropicStyle(usage, "kimi");
  return MissingField("kimi",
                      "prompt_tokens (OpenAI-compatible) or input_tokens "
                      "(Anthropic-compatible)");
}

namespace {

// The reason a diagnostics value names: a string, or an object's "type".
std::string ReasonWord(const Json* value) {
  if (value == nullptr) return "";
  if (value->is_string()) return value->get<std::string>();
  if (value->is_object()) {
    const Json* type = Member(*value, "type");
    if (type != nullptr && type->is_string()) return type->get<std::string>();
  }
  return "";
}

// `value` as a missed-token count, or -1 when it is not a plausible one.
int64_t MissedTokens(const Json* value) {
  if (value == nullptr || !value->is_number_integer()) return -1;
  if (value->is_number_unsigned()) {
    const uint64_t count = value->get<uint64_t>();
    return count <= static_cast<uint64_t>(kMaxTokenCount)
               ? static_cast<int64_t>(count)
               : -1;
  }
  const int64_t count = value->get<int64_t>();
  return count >= 0 && count <= kMaxTokenCount ? count : -1;
}

std::optional<v1::ProviderCacheDiagnostics> Diagnostics(std::string reason,
                                                        int64_t missed) {
  v1::ProviderCacheDiagnostics diagnostics;
  diagnostics.set_cache_miss_reason(std::move(reason));
  if (missed >= 0) diagnostics.set_cache_missed_input_tokens(missed);
  return BoundedDiagnostics(std::move(diagnostics));
}

}  // namespace

std::optional<v1::ProviderCacheDiagnostics> BoundedDiagnostics(
    v1::ProviderCacheDiagnostics diagnostics) {
  std::string& reason = *diagnostics.mutable_cache_miss_reason();
  if (reason.size() > kMaxProviderMissReasonBytes) {
    size_t cut = kMaxProviderMissReasonBytes;
    // Back to the start of a UTF-8 character.
    while (cut > 0 &&
           (static_cast<unsigned char>(reason[cut]) & 0xC0) == 0x80) {
      --cut;
    }
    reason.resize(cut);
  }
  if (reason.empty()) return std::nullopt;
  const int64_t missed = diagnostics.cache_missed_input_tokens();
  if (missed < 0 || missed > kMaxTokenCount) {
    diagnostics.clear_cache_missed_input_tokens();
  }
  return diagnostics;
}

std::optional<v1::ProviderCacheDiagnostics> ParseProviderDiagnostics(
    std::string_view raw_json) {
  if (raw_json.size() > kMaxRawUsageJsonBytes ||
      raw_json.find("diagnostics") == std::string_view::npos) {
    return std::nullopt;
  }
  const Json root = Json::parse(raw_json, nullptr, /*allow_exceptions=*/false);
  if (!root.is_object()) return std::nullopt;
  if (const Json* anthropic = Member(root, "diagnostics");
      anthropic != nullptr && anthropic->is_object()) {
    const Json* reason = Member(*anthropic, "cache_miss_reason");
    if (std::string word = ReasonWord(reason); !word.empty()) {
      return Diagnostics(
          std::move(word),
          reason->is_object()
              ? MissedTokens(Member(*reason, "cache_missed_input_tokens"))
              : -1);
    }
  }
  if (const Json* openai = Member(root, "prompt_cache_diagnostics");
      openai != nullptr && openai->is_object()) {
    const std::string outcome = ReasonWord(openai);
    if (outcome == "cache_miss") {
      std::string word = ReasonWord(Member(*openai, "reason"));
      return Diagnostics(word.empty() ? outcome : std::move(word),
                         MissedTokens(Member(*openai, "cache_missed_tokens")));
    }
    if (!outcome.empty()) return Diagnostics(outcome, -1);
  }
  return std::nullopt;
}

absl::StatusOr<v1::NormalizedUsage> NormalizeRawUsage(
    v1::Provider provider, std::string_view raw_json) {
  const ProviderRow* row = FindProvider(provider);
  if (row == nullptr) {
    const std::string& name = v1::Provider_Name(provider);
    return RawError(absl::StrCat(
        "no usage format for provider ", static_cast<int>(provider),
        name.empty() ? "" : " (", name, name.empty() ? "" : ")"));
  }
  // The size bound also bounds the nesting depth nlohmann has to handle.
  if (raw_json.size() > kMaxRawUsageJsonBytes) {
    return RawError(absl::StrCat("is ", raw_json.size(),
                                 " bytes, more than the limit of ",
                                 kMaxRawUsageJsonBytes));
  }
  Json root;
  CACHEWATCH_RETURN_IF_ERROR(ParseObject(raw_json, &root));
  return row->normalize(root);
}

absl::Status ValidateNormalizedUsage(const v1::NormalizedUsage& usage) {
  const std::pair<absl::string_view, int64_t> counts[] = {
      {"uncached_input_tokens", usage.uncached_input_tokens()},
      {"cache_read_tokens", usage.cache_read_tokens()},
      {"cache_write_tokens", usage.cache_write_tokens()},
      {"cache_write_5m_tokens", usage.cache_write_5m_tokens()},
      {"cache_write_1h_tokens", usage.cache_write_1h_tokens()},
      {"output_tokens", usage.output_tokens()},
  };
  for (const auto& [field, count] : counts) {
    if (count < 0 || count > kMaxTokenCount) {
      return absl::InvalidArgumentError(
          absl::StrCat("normalized usage: ", field, " (", count,
                       ") is outside [0, ", kMaxTokenCount, "]"));
    }
  }
  const int64_t split =
      usage.cache_write_5m_tokens() + usage.cache_write_1h_tokens();
  if (split > usage.cache_write_tokens()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "normalized usage: cache_write_5m_tokens + cache_write_1h_tokens (",
        split, ") exceeds cache_write_tokens (", usage.cache_write_tokens(),
        ")"));
  }
  return absl::OkStatus();
}

int64_t PromptTotalTokens(const v1::NormalizedUsage& usage) {
  return usage.uncached_input_tokens() + usage.cache_read_tokens() +
         usage.cache_write_tokens();
}

}  // namespace cachewatch
