#include "daemon/pipeline/validation.h"

#include <google/protobuf/util/time_util.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "daemon/core/usage_normalizer.h"
#include "daemon/util/status_macros.h"

namespace cachewatch {
namespace {

using google::protobuf::util::TimeUtil;

absl::Status Invalid(absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", problem));
}

// Whether CheckText passes. Fields whose name must be built (an index, a
// prefix) are checked with it first and named only when they fail, so that
// a valid record allocates no names.
bool TextOk(const std::string& value, bool required, size_t max_bytes) {
  return !(required && value.empty()) && value.size() <= max_bytes;
}

absl::Status CheckText(absl::string_view field, const std::string& value,
                       bool required, size_t max_bytes) {
  if (required && value.empty()) return Invalid(field, "required");
  if (value.size() > max_bytes) {
    return Invalid(field, absl::StrCat("longer than ", max_bytes, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status CheckTime(absl::string_view field,
                       const google::protobuf::Timestamp& time, bool present,
                       const ValidationLimits& limits, int64_t now_us) {
  if (!present) return Invalid(field, "required");
  constexpr int64_t kMinSeconds = -62'135'596'800;  // 0001-01-01
  constexpr int64_t kMaxSeconds = 253'402'300'799;  // 9999-12-31
  if (time.seconds() < kMinSeconds || time.seconds() > kMaxSeconds ||
      time.nanos() < 0 || time.nanos() > 999'999'999) {
    return Invalid(field, "out of range");
  }
  const int64_t time_us = TimeUtil::TimestampToMicroseconds(time);
  if (time_us < limits.min_time_us) {
    return Invalid(
        field, absl::StrCat(TimeUtil::ToString(time), " is before 2020-01-01"));
  }
  if (time_us > now_us + limits.max_future_skew_us) {
    return Invalid(field, absl::StrCat(TimeUtil::ToString(time),
                                       " is too far in the future"));
  }
  return absl::OkStatus();
}

template <typename Record>
absl::Status CheckLaneKey(absl::string_view kind, const Record& record,
                          const ValidationLimits& limits) {
  const struct {
    const char* name;
    const std::string& value;
    bool required;
    size_t max_bytes;
  } fields[] = {
      {".agent", record.agent(), true, limits.max_name_bytes},
      {".session_id", record.session_id(), true, limits.max_id_bytes},
      {".lane", record.lane(), false, limits.max_name_bytes},
      {".request_id", record.request_id(), true, limits.max_id_bytes},
  };
  for (const auto& field : fields) {
    if (!TextOk(field.value, field.required, field.max_bytes)) {
      return CheckText(absl::StrCat(kind, field.name), field.value,
                       field.required, field.max_bytes);
    }
  }
  return absl::OkStatus();
}

absl::Status CheckProvider(absl::string_view field, v1::Provider provider) {
  if (provider == v1::PROVIDER_UNSPECIFIED || !v1::Provider_IsValid(provider)) {
    return Invalid(field, "required (a known provider)");
  }
  return absl::OkStatus();
}

absl::Status CheckTools(const v1::Snapshot& snapshot,
                        const ValidationLimits& limits) {
  if (snapshot.tools_size() > limits.max_tools) {
    return Invalid("snapshot.tools",
                   absl::StrCat(snapshot.tools_size(), " tools, more than ",
                                limits.max_tools));
  }
  for (int i = 0; i < snapshot.tools_size(); ++i) {
    const std::string& name = snapshot.tools(i).name();
    if (!TextOk(name, true, limits.max_id_bytes)) {
      return CheckText(absl::StrCat("snapshot.tools[", i, "].name"), name, true,
                       limits.max_id_bytes);
    }
  }
  return absl::OkStatus();
}

absl::Status CheckTtl(absl::string_view field, uint32_t ttl_seconds,
                      const ValidationLimits& limits) {
  if (ttl_seconds > limits.max_ttl_seconds) {
    return Invalid(field, absl::StrCat(ttl_seconds, " s is more than ",
                                       limits.max_ttl_seconds));
  }
  return absl::OkStatus();
}

absl::Status CheckCacheControl(const v1::Snapshot& snapshot,
                               const ValidationLimits& limits) {
  const v1::CacheControl& control = snapshot.cache_control();
  CACHEWATCH_RETURN_IF_ERROR(CheckTtl("snapshot.cache_control.ttl_seconds",
                                      control.ttl_seconds(), limits));
  if (control.breakpoints_size() > limits.max_breakpoints) {
    return Invalid("snapshot.cache_control.breakpoints",
                   absl::StrCat("more than ", limits.max_breakpoints));
  }
  for (int i = 0; i < control.breakpoints_size(); ++i) {
    const v1::Breakpoint& breakpoint = control.breakpoints(i);
    auto field = [i](absl::string_view rest) {
      return absl::StrCat("snapshot.cache_control.breakpoints[", i, "]", rest);
    };
    if (breakpoint.segment() == v1::PROMPT_SEGMENT_UNSPECIFIED ||
        !v1::PromptSegment_IsValid(breakpoint.segment())) {
      return Invalid(field(".segment"), "required");
    }
    if (breakpoint.ttl_seconds() > limits.max_ttl_seconds) {
      return CheckTtl(field(".ttl_seconds"), breakpoint.ttl_seconds(), limits);
    }
    if (breakpoint.index() >=
        static_cast<uint32_t>(limits.max_message_chain_blocks)) {
      return Invalid(field(".index"),
                     absl::StrCat(breakpoint.index(), " is not below ",
                                  limits.max_message_chain_blocks));
    }
    if (breakpoint.has_blocks_after() &&
        breakpoint.blocks_after() >=
            static_cast<uint32_t>(limits.max_message_chain_blocks)) {
      return Invalid(field(".blocks_after"),
                     absl::StrCat(breakpoint.blocks_after(), " is not below ",
                                  limits.max_message_chain_blocks));
    }
    if (breakpoint.segment() == v1::PROMPT_SEGMENT_MESSAGES &&
        snapshot.message_chain_size() > 0 &&
        breakpoint.index() >=
            static_cast<uint32_t>(snapshot.message_chain_size())) {
      return Invalid(
          field(".index"),
          absl::StrCat(breakpoint.index(), " is past the message chain's ",
                       snapshot.message_chain_size(), " blocks"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateSnapshot(const v1::Snapshot& snapshot,
                              const ValidationLimits& limits, int64_t now_us) {
  CACHEWATCH_RETURN_IF_ERROR(CheckLaneKey("snapshot", snapshot, limits));
  CACHEWATCH_RETURN_IF_ERROR(
      CheckTime("snapshot.request_time", snapshot.request_time(),
                snapshot.has_request_time(), limits, now_us));
  CACHEWATCH_RETURN_IF_ERROR(
      CheckProvider("snapshot.provider", snapshot.provider()));
  CACHEWATCH_RETURN_IF_ERROR(CheckText("snapshot.model", snapshot.model(), true,
                                       limits.max_name_bytes));
  CACHEWATCH_RETURN_IF_ERROR(CheckTools(snapshot, limits));
  if (snapshot.system_sections_size() > limits.max_system_sections) {
    return Invalid("snapshot.system_sections",
                   absl::StrCat("more than ", limits.max_system_sections));
  }
  for (int i = 0; i < snapshot.system_sections_size(); ++i) {
    const std::string& name = snapshot.system_sections(i).name();
    if (!TextOk(name, true, limits.max_name_bytes)) {
      return CheckText(absl::StrCat("snapshot.system_sections[", i, "].name"),
                       name, true, limits.max_name_bytes);
    }
  }
  if (snapshot.message_chain_size() > limits.max_message_chain_blocks) {
    return Invalid(
        "snapshot.message_chain",
        absl::StrCat(snapshot.message_chain_size(), " blocks, more than ",
                     limits.max_message_chain_blocks));
  }
  if (!v1::ExpectedDrop_IsValid(snapshot.expected_drop())) {
    return Invalid("snapshot.expected_drop", "unknown value");
  }
  if (!v1::ToolOrderPolicy_IsValid(snapshot.tool_order_policy())) {
    return Invalid("snapshot.tool_order_policy", "unknown value");
  }
  return CheckCacheControl(snapshot, limits);
}

absl::StatusOr<v1::NormalizedUsage> ValidateUsage(
    const v1::Usage& usage, const ValidationLimits& limits, int64_t now_us) {
  CACHEWATCH_RETURN_IF_ERROR(CheckLaneKey("usage", usage, limits));
  CACHEWATCH_RETURN_IF_ERROR(
      CheckTime("usage.response_time", usage.response_time(),
                usage.has_response_time(), limits, now_us));
  CACHEWATCH_RETURN_IF_ERROR(CheckProvider("usage.provider", usage.provider()));
  CACHEWATCH_RETURN_IF_ERROR(
      CheckText("usage.model", usage.model(), false, limits.max_name_bytes));
  if (usage.has_provider_diagnostics()) {
    const v1::ProviderCacheDiagnostics& diagnostics =
        usage.provider_diagnostics();
    CACHEWATCH_RETURN_IF_ERROR(CheckText(
        "usage.provider_diagnostics.cache_miss_reason",
        diagnostics.cache_miss_reason(), true, limits.max_reason_bytes));
    if (diagnostics.cache_missed_input_tokens() < 0 ||
        diagnostics.cache_missed_input_tokens() > kMaxTokenCount) {
      return Invalid("usage.provider_diagnostics.cache_missed_input_tokens",
                     absl::StrCat(diagnostics.cache_missed_input_tokens(),
                                  " is outside [0, ", kMaxTokenCount, "]"));
    }
  }
  if (usage.has_normalized()) {
    if (absl::Status status = ValidateNormalizedUsage(usage.normalized());
        !status.ok()) {
      return Invalid("usage.normalized", std::string(status.message()));
    }
    return usage.normalized();
  }
  if (usage.raw_usage_json().empty()) {
    return Invalid("usage", "one of normalized or raw_usage_json is required");
  }
  absl::StatusOr<v1::NormalizedUsage> normalized =
      NormalizeRawUsage(usage.provider(), usage.raw_usage_json());
  if (!normalized.ok()) {
    return Invalid("usage", std::string(normalized.status().message()));
  }
  return normalized;
}

namespace {

absl::Status CheckReason(const std::string& field, v1::Reason reason) {
  if (!v1::Reason_IsValid(reason)) return Invalid(field, "unknown value");
  return absl::OkStatus();
}

// A query filter's time bound: only its range is checked (a query may ask
// for any past or future period).
absl::Status CheckFilterTime(const std::string& field,
                             const google::protobuf::Timestamp& time,
                             bool present) {
  if (!present) return absl::OkStatus();
  constexpr int64_t kMinSeconds = -62'135'596'800;  // 0001-01-01
  constexpr int64_t kMaxSeconds = 253'402'300'799;  // 9999-12-31
  if (time.seconds() < kMinSeconds || time.seconds() > kMaxSeconds ||
      time.nanos() < 0 || time.nanos() > 999'999'999) {
    return Invalid(field, "out of range");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateListBreaksRequest(const v1::ListBreaksRequest& request,
                                       const ValidationLimits& limits) {
  CACHEWATCH_RETURN_IF_ERROR(CheckFilterTime(
      "list_breaks.since", request.since(), request.has_since()));
  CACHEWATCH_RETURN_IF_ERROR(CheckFilterTime(
      "list_breaks.until", request.until(), request.has_until()));
  CACHEWATCH_RETURN_IF_ERROR(CheckText("list_breaks.agent", request.agent(),
                                       false, limits.max_name_bytes));
  CACHEWATCH_RETURN_IF_ERROR(CheckText("list_breaks.session_id",
                                       request.session_id(), false,
                                       limits.max_id_bytes));
  CACHEWATCH_RETURN_IF_ERROR(CheckText("list_breaks.lane", request.lane(),
                                       false, limits.max_name_bytes));
  CACHEWATCH_RETURN_IF_ERROR(CheckText("list_breaks.model", request.model(),
                                       false, limits.max_name_bytes));
  CACHEWATCH_RETURN_IF_ERROR(
      CheckReason("list_breaks.reason", request.reason()));
  return CheckText("list_breaks.page_token", request.page_token(), false,
                   limits.max_page_token_bytes);
}

absl::Status ValidateExplainBreakRequest(const v1::ExplainBreakRequest& request,
                                         const ValidationLimits& limits) {
  return CheckText("break_id", request.break_id(), true,
                   limits.max_break_id_bytes);
}

absl::Status ValidateWatchBreaksRequest(const v1::WatchBreaksRequest& request,
                                        const ValidationLimits& limits) {
  CACHEWATCH_RETURN_IF_ERROR(CheckText("watch_breaks.agent", request.agent(),
                                       false, limits.max_name_bytes));
  CACHEWATCH_RETURN_IF_ERROR(CheckText("watch_breaks.model", request.model(),
                                       false, limits.max_name_bytes));
  CACHEWATCH_RETURN_IF_ERROR(CheckText("watch_breaks.session_id",
                                       request.session_id(), false,
                                       limits.max_id_bytes));
  return CheckReason("watch_breaks.reason", request.reason());
}

absl::Status ValidateLaneTimelineRequest(
    const v1::GetLaneTimelineRequest& request, const ValidationLimits& limits) {
  CACHEWATCH_RETURN_IF_ERROR(
      CheckText("agent", request.agent(), true, limits.max_name_bytes));
  CACHEWATCH_RETURN_IF_ERROR(
      CheckText("session_id", request.session_id(), true, limits.max_id_bytes));
  return CheckText("lane", request.lane(), false, limits.max_name_bytes);
}

}  // namespace cachewatch
