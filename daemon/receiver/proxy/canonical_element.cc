#include "daemon/receiver/proxy/canonical_element.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "cachewatch/client/canonical_json.h"
#include "daemon/receiver/proxy/json_document.h"
#include "daemon/util/status_macros.h"

namespace cachewatch {
namespace {

namespace dom = simdjson::dom;

// Sorts `members` (each with a `name`) into canonical order and drops all
// but the last of each repeated name: the member nlohmann keeps. Checks the
// names first, as the client's writer does.
template <typename Members>
absl::Status SortAndKeepLast(Members& members) {
  for (const auto& member : members) {
    CACHEWATCH_RETURN_IF_ERROR(client::CheckCanonicalMemberName(member.name));
  }
  std::stable_sort(members.begin(), members.end(),
                   [](const auto& a, const auto& b) {
                     return client::CanonicalNameLess(a.name, b.name);
                   });
  // Of each run of one name, the last set is the last in the run.
  auto kept = members.begin();
  for (auto it = members.begin(); it != members.end(); ++it) {
    const auto next = it + 1;
    if (next != members.end() && next->name == it->name) continue;
    if (kept != it) *kept = std::move(*it);
    ++kept;
  }
  members.erase(kept, members.end());
  return absl::OkStatus();
}

struct ElementMember {
  std::string_view name;
  dom::element value;
};

}  // namespace

absl::Status AppendCanonicalElement(dom::element element, int depth,
                                    std::string* out, std::string_view except) {
  switch (element.type()) {
    case dom::element_type::OBJECT: {
      CACHEWATCH_RETURN_IF_ERROR(client::CheckCanonicalDepth(depth));
      absl::InlinedVector<ElementMember, 16> members;
      for (const dom::key_value_pair field : ObjectOf(element)) {
        if (!except.empty() && field.key == except) continue;
        members.push_back({field.key, field.value});
      }
      CACHEWATCH_RETURN_IF_ERROR(SortAndKeepLast(members));
      out->push_back('{');
      for (size_t i = 0; i < members.size(); ++i) {
        if (i > 0) out->push_back(',');
        CACHEWATCH_RETURN_IF_ERROR(
            client::AppendCanonicalString(members[i].name, out));
        out->push_back(':');
        CACHEWATCH_RETURN_IF_ERROR(
            AppendCanonicalElement(members[i].value, depth + 1, out));
      }
      out->push_back('}');
      return absl::OkStatus();
    }
    case dom::element_type::ARRAY: {
      CACHEWATCH_RETURN_IF_ERROR(client::CheckCanonicalDepth(depth));
      out->push_back('[');
      bool first = true;
      for (const dom::element value : ArrayOf(element)) {
        if (!first) out->push_back(',');
        first = false;
        CACHEWATCH_RETURN_IF_ERROR(AppendCanonicalElement(
            value, depth + 1, out, value.is_object() ? except : ""));
      }
      out->push_back(']');
      return absl::OkStatus();
    }
    case dom::element_type::STRING:
      return client::AppendCanonicalString(element.get_string().value_unsafe(),
                                           out);
    case dom::element_type::INT64:
      return client::AppendCanonicalNumber(
          static_cast<double>(element.get_int64().value_unsafe()), out);
    case dom::element_type::UINT64:
      return client::AppendCanonicalNumber(
          static_cast<double>(element.get_uint64().value_unsafe()), out);
    case dom::element_type::DOUBLE:
      return client::AppendCanonicalNumber(element.get_double().value_unsafe(),
                                           out);
    case dom::element_type::BOOL:
      out->append(element.get_bool().value_unsafe() ? "true" : "false");
      return absl::OkStatus();
    case dom::element_type::NULL_VALUE:
      out->append("null");
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> CanonicalElement(dom::element element,
                                             std::string_view except) {
  std::string out;
  CACHEWATCH_RETURN_IF_ERROR(AppendCanonicalElement(element, 0, &out, except));
  return out;
}

void CanonicalObject::SetMembersOf(dom::element object,
                                   std::string_view except) {
  for (const dom::key_value_pair field : ObjectOf(object)) {
    if (except.empty() || field.key != except) Set(field.key, field.value);
  }
}

void CanonicalObject::Set(std::string_view name, dom::element value) {
  members_.push_back({name, value, {}});
}

void CanonicalObject::SetWithout(std::string_view name, dom::element value,
                                 std::string_view except) {
  members_.push_back({name, value, except});
}

void CanonicalObject::SetString(std::string_view name, std::string_view value) {
  members_.push_back({name, StringValue{value}, {}});
}

void CanonicalObject::SetCanonical(std::string_view name,
                                   absl::StatusOr<std::string> canonical) {
  members_.push_back({name, std::move(canonical), {}});
}

std::optional<dom::element> CanonicalObject::Get(std::string_view name) const {
  for (auto it = members_.rbegin(); it != members_.rend(); ++it) {
    if (it->name != name) continue;
    if (const auto* element = std::get_if<dom::element>(&it->value)) {
      return *element;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

void CanonicalObject::Remove(std::string_view name) {
  std::erase_if(members_,
                [name](const Member& member) { return member.name == name; });
}

absl::Status CanonicalObject::AppendTo(int depth, std::string* out) const {
  CACHEWATCH_RETURN_IF_ERROR(client::CheckCanonicalDepth(depth));
  // Sorted as references, which carry the name the sort reads.
  struct Ref {
    std::string_view name;
    const Member* member;
  };
  absl::InlinedVector<Ref, 16> refs;
  for (const Member& member : members_) refs.push_back({member.name, &member});
  CACHEWATCH_RETURN_IF_ERROR(SortAndKeepLast(refs));
  out->push_back('{');
  for (size_t i = 0; i < refs.size(); ++i) {
    if (i > 0) out->push_back(',');
    const Member& member = *refs[i].member;
    CACHEWATCH_RETURN_IF_ERROR(client::AppendCanonicalString(member.name, out));
    out->push_back(':');
    if (const auto* element = std::get_if<dom::element>(&member.value)) {
      CACHEWATCH_RETURN_IF_ERROR(
          AppendCanonicalElement(*element, depth + 1, out, member.except));
    } else if (const auto* string = std::get_if<StringValue>(&member.value)) {
      CACHEWATCH_RETURN_IF_ERROR(
          client::AppendCanonicalString(string->text, out));
    } else {
      const auto& canonical =
          std::get<absl::StatusOr<std::string>>(member.value);
      if (!canonical.ok()) return canonical.status();
      out->append(*canonical);
    }
  }
  out->push_back('}');
  return absl::OkStatus();
}

absl::StatusOr<std::string> CanonicalObject::ToCanonical() const {
  std::string out;
  CACHEWATCH_RETURN_IF_ERROR(AppendTo(0, &out));
  return out;
}

}  // namespace cachewatch
