// ListBreaks paging, as both stores answer it (SqliteStore's
// read_connection.cc, PostgresStore's postgres_queries.cc): the page a
// request asks for (its size, the filters it combines, where it starts) and
// the opaque page token, the keyset position of the last break a page
// returned.
//
// Plain values and pure functions; thread-safe.
#ifndef CACHEWATCH_DAEMON_STORE_BREAK_PAGES_H_
#define CACHEWATCH_DAEMON_STORE_BREAK_PAGES_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cachewatch/v1/service.pb.h"

namespace cachewatch {

// ListBreaks filters, as bits (each store's statement cache key).
enum ListFilter : unsigned {
  kSince = 1 << 0,
  kUntil = 1 << 1,
  kAgentFilter = 1 << 2,
  kSessionFilter = 1 << 3,
  kLaneFilter = 1 << 4,
  kModelFilter = 1 << 5,
  kReasonFilter = 1 << 6,
  kAfterToken = 1 << 7,
};

// The keyset position after which a page starts: the last break returned.
struct PagePosition {
  int64_t request_time_us = 0;
  std::string break_id;
};

inline std::string EncodePageToken(const PagePosition& position) {
  return absl::WebSafeBase64Escape(
      absl::StrCat(position.request_time_us, ":", position.break_id));
}

// nullopt for a token EncodePageToken did not make.
inline std::optional<PagePosition> DecodePageToken(const std::string& token) {
  std::string raw;
  if (!absl::WebSafeBase64Unescape(token, &raw)) return std::nullopt;
  const size_t colon = raw.find(':');
  if (colon == std::string::npos || colon + 1 == raw.size()) {
    return std::nullopt;
  }
  PagePosition position;
  if (!absl::SimpleAtoi(raw.substr(0, colon), &position.request_time_us)) {
    return std::nullopt;
  }
  position.break_id = raw.substr(colon + 1);
  return position;
}

// The page a ListBreaks request asks for.
struct BreakPage {
  // Breaks on the page: page_size, 100 when 0, at most 1000.
  int size = 0;
  // The filters the request sets (ListFilter bits), kAfterToken with a
  // page token.
  unsigned filters = 0;
  // Where the page starts: after this break (from the page token).
  std::optional<PagePosition> after;
};

// INVALID_ARGUMENT for a negative page_size or a page token EncodePageToken
// did not make.
inline absl::StatusOr<BreakPage> BreakPageOf(
    const v1::ListBreaksRequest& request) {
  constexpr int kDefaultPageSize = 100;
  constexpr int kMaxPageSize = 1000;
  if (request.page_size() < 0) {
    return absl::InvalidArgumentError("page_size must not be negative");
  }
  BreakPage page;
  page.size = request.page_size() == 0
                  ? kDefaultPageSize
                  : std::min(request.page_size(), kMaxPageSize);
  if (!request.page_token().empty()) {
    page.after = DecodePageToken(request.page_token());
    if (!page.after.has_value()) {
      return absl::InvalidArgumentError("invalid page_token");
    }
  }
  if (request.has_since()) page.filters |= kSince;
  if (request.has_until()) page.filters |= kUntil;
  if (!request.agent().empty()) page.filters |= kAgentFilter;
  if (!request.session_id().empty()) page.filters |= kSessionFilter;
  if (!request.lane().empty()) page.filters |= kLaneFilter;
  if (!request.model().empty()) page.filters |= kModelFilter;
  if (request.reason() != v1::REASON_UNSPECIFIED) {
    page.filters |= kReasonFilter;
  }
  if (page.after.has_value()) page.filters |= kAfterToken;
  return page;
}

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_STORE_BREAK_PAGES_H_
