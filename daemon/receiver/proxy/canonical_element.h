// Canonical JSON (client/canonical_json.h, RFC 8785) written straight from
// a parsed JsonDocument, byte for byte what the client library writes for
// the value nlohmann::json::parse makes of the same text: numbers as
// doubles, a repeated member name's last value, members in UTF-16 order,
// and the same errors (a value nesting deeper than kMaxCanonicalJsonDepth,
// invalid UTF-8). The proxy hashes tools and content blocks with it, without
// building nlohmann's document first (docs/PERFORMANCE.md, round 23).
//
// Thread-safe: pure functions; a CanonicalObject is not shared.
#ifndef CACHEWATCH_DAEMON_RECEIVER_PROXY_CANONICAL_ELEMENT_H_
#define CACHEWATCH_DAEMON_RECEIVER_PROXY_CANONICAL_ELEMENT_H_

#include <simdjson.h>

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace cachewatch {

// Appends the canonical form of `element`, which sits inside `depth` arrays
// or objects. An object's member named `except` (when not empty) is left out
// of it, and so, when `element` is an array, of each object in it.
absl::Status AppendCanonicalElement(simdjson::dom::element element, int depth,
                                    std::string* out,
                                    std::string_view except = {});

// The canonical form of `element` as a whole value, `except` as above.
absl::StatusOr<std::string> CanonicalElement(simdjson::dom::element element,
                                             std::string_view except = {});

// An object put together from members of parsed objects and values of its
// own, as nlohmann's `object[name] = value` would build it: a member set
// later replaces an earlier one of the same name. Names and values it holds
// as views: they must outlive it.
class CanonicalObject {
 public:
  // Sets every member of `object` (an object element), but `except`.
  void SetMembersOf(simdjson::dom::element object,
                    std::string_view except = {});
  void Set(std::string_view name, simdjson::dom::element value);
  // A member whose value is an element written as AppendCanonicalElement
  // writes it with `except`.
  void SetWithout(std::string_view name, simdjson::dom::element value,
                  std::string_view except);
  void SetString(std::string_view name, std::string_view value);
  // `canonical` is a value's canonical form already, or the error writing
  // this object returns when it comes to the member.
  void SetCanonical(std::string_view name,
                    absl::StatusOr<std::string> canonical);

  // The value of the member `name` when it is an element: the last set.
  std::optional<simdjson::dom::element> Get(std::string_view name) const;
  // Leaves the member `name` out.
  void Remove(std::string_view name);

  // Appends the object, which sits inside `depth` arrays or objects.
  absl::Status AppendTo(int depth, std::string* out) const;
  absl::StatusOr<std::string> ToCanonical() const;

 private:
  struct StringValue {
    std::string_view text;
  };
  struct Member {
    std::string_view name;
    std::variant<simdjson::dom::element, StringValue,
                 absl::StatusOr<std::string>>
        value;
    std::string_view except;  // For an element value.
  };

  std::vector<Member> members_;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_RECEIVER_PROXY_CANONICAL_ELEMENT_H_
