#include "daemon/core/snapshot_interner.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace cachewatch {
namespace {

v1::Snapshot Full(const std::string& request_id) {
  v1::Snapshot snapshot;
  snapshot.set_agent("agent");
  snapshot.set_session_id("session");
  snapshot.set_request_id(request_id);
  snapshot.mutable_request_time()->set_seconds(100);
  snapshot.set_provider(v1::PROVIDER_ANTHROPIC);
  snapshot.set_model("claude-sonnet-4-5");
  snapshot.set_system_hash(7);
  v1::SystemSection* section = snapshot.add_system_sections();
  section->set_name("date");
  section->set_hash(8);
  snapshot.add_tools()->set_name("Read");
  v1::CacheControl* control = snapshot.mutable_cache_control();
  control->set_enabled(true);
  control->set_ttl_seconds(300);
  v1::Breakpoint* breakpoint = control->add_breakpoints();
  breakpoint->set_segment(v1::PROMPT_SEGMENT_MESSAGES);
  breakpoint->set_index(3);
  snapshot.set_options_hash(9);
  snapshot.add_message_chain(10);
  snapshot.set_expected_drop(v1::EXPECTED_DROP_ABORTED_PREVIOUS);
  snapshot.set_tool_order_policy(v1::TOOL_ORDER_POLICY_LEXICOGRAPHIC);
  return snapshot;
}

TEST(SnapshotInternerTest, KeepsTheSharedPartOnly) {
  SnapshotInterner interner;
  const std::shared_ptr<const v1::Snapshot> part =
      interner.Intern(Full("req-1"));
  EXPECT_EQ(part->provider(), v1::PROVIDER_ANTHROPIC);
  EXPECT_EQ(part->model(), "claude-sonnet-4-5");
  EXPECT_EQ(part->system_hash(), 7u);
  ASSERT_EQ(part->system_sections_size(), 1);
  EXPECT_EQ(part->system_sections(0).name(), "date");
  EXPECT_EQ(part->system_sections(0).hash(), 8u);
  EXPECT_TRUE(part->cache_control().enabled());
  EXPECT_EQ(part->cache_control().ttl_seconds(), 300u);
  ASSERT_EQ(part->cache_control().breakpoints_size(), 1);
  EXPECT_EQ(part->cache_control().breakpoints(0).index(), 3u);
  EXPECT_EQ(part->options_hash(), 9u);
  EXPECT_EQ(part->expected_drop(), v1::EXPECTED_DROP_ABORTED_PREVIOUS);
  EXPECT_EQ(part->tool_order_policy(), v1::TOOL_ORDER_POLICY_LEXICOGRAPHIC);
  // The lane's own fields, the tools and the message chain are not in it.
  EXPECT_TRUE(part->agent().empty());
  EXPECT_TRUE(part->session_id().empty());
  EXPECT_TRUE(part->request_id().empty());
  EXPECT_FALSE(part->has_request_time());
  EXPECT_EQ(part->tools_size(), 0);
  EXPECT_EQ(part->message_chain_size(), 0);
}

TEST(SnapshotInternerTest, EqualPartsShareOneCopy) {
  SnapshotInterner interner;
  v1::Snapshot other_lane = Full("req-2");
  other_lane.set_session_id("another session");
  other_lane.add_message_chain(11);
  other_lane.mutable_tools(0)->set_name("Bash");
  const auto a = interner.Intern(Full("req-1"));
  EXPECT_EQ(interner.Intern(other_lane).get(), a.get());
  EXPECT_EQ(interner.size(), 1u);
}

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using Changes = std::vector<std::pair<std::string, std::unique_ptr<Message>>>;

// A change that adds one to the integer `field`, read and written with
// Reflection's `get` and `set` of its type.
template <typename Integer>
auto Incremented(const FieldDescriptor* field,
                 Integer (Reflection::*get)(const Message&,
                                            const FieldDescriptor*) const,
                 void (Reflection::*set)(Message*, const FieldDescriptor*,
                                         Integer) const) {
  return [field, get, set](Message& copy) {
    const Reflection* reflection = copy.GetReflection();
    (reflection->*set)(&copy, field, (reflection->*get)(copy, field) + 1);
  };
}

// Copies of `message`, each with one field changed: every singular field
// (set to a value unequal to its own), every repeated field (one element
// added, and each field of its first element changed), and inside every
// message field. Fields named in `skip` (top level only) are left alone.
Changes EachFieldChanged(const Message& message,
                         const std::set<std::string>& skip = {}) {
  Changes changes;
  const google::protobuf::Descriptor* descriptor = message.GetDescriptor();
  const Reflection* reflection = message.GetReflection();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor* field = descriptor->field(i);
    if (skip.count(field->name()) > 0) continue;
    const auto add = [&](const std::string& what, const auto& change) {
      std::unique_ptr<Message> copy(message.New());
      copy->CopyFrom(message);
      change(*copy);
      changes.emplace_back(field->name() + what, std::move(copy));
    };
    if (field->is_repeated()) {
      add(" (an element added)", [&](Message& copy) {
        if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
          reflection->AddMessage(&copy, field);
        } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_UINT64) {
          reflection->AddUInt64(&copy, field, 1);
        } else {
          ADD_FAILURE() << "no change written for " << field->full_name();
        }
      });
      if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE &&
          reflection->FieldSize(message, field) > 0) {
        const Changes inner =
            EachFieldChanged(reflection->GetRepeatedMessage(message, field, 0));
        for (const auto& [what, element] : inner) {
          add("[0]." + what, [&](Message& copy) {
            reflection->MutableRepeatedMessage(&copy, field, 0)
                ->CopyFrom(*element);
          });
        }
      }
      continue;
    }
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_MESSAGE: {
        if (reflection->HasField(message, field)) {
          add(" (cleared)",
              [&](Message& copy) { reflection->ClearField(&copy, field); });
        }
        const Changes inner =
            EachFieldChanged(reflection->GetMessage(message, field));
        for (const auto& [what, element] : inner) {
          add("." + what, [&](Message& copy) {
            reflection->MutableMessage(&copy, field)->CopyFrom(*element);
          });
        }
        break;
      }
      case FieldDescriptor::CPPTYPE_STRING:
        add("", [&](Message& copy) {
          reflection->SetString(&copy, field,
                                reflection->GetString(copy, field) + "x");
        });
        break;
      case FieldDescriptor::CPPTYPE_ENUM:
        add("", [&](Message& copy) {
          const int value = reflection->GetEnumValue(copy, field);
          reflection->SetEnumValue(&copy, field, value == 0 ? 1 : 0);
        });
        break;
      case FieldDescriptor::CPPTYPE_BOOL:
        add("", [&](Message& copy) {
          reflection->SetBool(&copy, field, !reflection->GetBool(copy, field));
        });
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
        add("",
            Incremented(field, &Reflection::GetUInt32, &Reflection::SetUInt32));
        break;
      case FieldDescriptor::CPPTYPE_INT32:
        add("",
            Incremented(field, &Reflection::GetInt32, &Reflection::SetInt32));
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        add("",
            Incremented(field, &Reflection::GetInt64, &Reflection::SetInt64));
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        add("",
            Incremented(field, &Reflection::GetUInt64, &Reflection::SetUInt64));
        break;
      default:
        ADD_FAILURE() << "no change written for " << field->full_name();
    }
    if (field->has_presence() && !reflection->HasField(message, field)) {
      // Present with its default value: unequal to absent.
      add(" (present, default value)", [&](Message& copy) {
        switch (field->cpp_type()) {
          case FieldDescriptor::CPPTYPE_UINT32:
            reflection->SetUInt32(&copy, field, 0);
            break;
          case FieldDescriptor::CPPTYPE_MESSAGE:
            reflection->MutableMessage(&copy, field);
            break;
          default:
            ADD_FAILURE() << "no presence change for " << field->full_name();
        }
      });
    }
  }
  return changes;
}

const v1::Snapshot& AsSnapshot(const std::unique_ptr<Message>& message) {
  return dynamic_cast<const v1::Snapshot&>(*message);
}

// The fields a lane keeps itself, outside the shared part.
const std::set<std::string> kLaneFields = {
    "agent",        "session_id", "lane",         "request_id",
    "request_time", "tools",      "message_chain"};

// Found by reflection, so that a field added to the snapshot or to a message
// inside it is covered without this test knowing of it.
TEST(SnapshotInternerTest, EachSharedFieldMakesPartsDistinct) {
  // With no cache_control as well, so that an empty one is a change.
  v1::Snapshot no_cache_control = Full("req");
  no_cache_control.clear_cache_control();
  for (const v1::Snapshot& original : {Full("req"), no_cache_control}) {
    SnapshotInterner interner;
    const auto base = interner.Intern(original);
    const auto changes = EachFieldChanged(original, kLaneFields);
    ASSERT_GE(changes.size(), 8u);
    for (const auto& [what, message] : changes) {
      const v1::Snapshot& changed = AsSnapshot(message);
      EXPECT_NE(interner.Intern(changed), base) << what;
      // Compared with the known copy, field by field.
      EXPECT_NE(interner.Intern(changed, base), base) << what;
      EXPECT_EQ(interner.Intern(changed, base), interner.Intern(changed))
          << what;
    }
  }
}

TEST(SnapshotInternerTest, LaneFieldsDoNotMakePartsDistinct) {
  SnapshotInterner interner;
  const auto base = interner.Intern(Full("req"));
  const auto changes = EachFieldChanged(
      Full("req"), /*skip=*/{"provider", "model", "system_hash",
                             "system_sections", "cache_control", "options_hash",
                             "expected_drop", "tool_order_policy"});
  ASSERT_GE(changes.size(), 7u);
  for (const auto& [what, message] : changes) {
    const v1::Snapshot& changed = AsSnapshot(message);
    EXPECT_EQ(interner.Intern(changed), base) << what;
    EXPECT_EQ(interner.Intern(changed, base), base) << what;
  }
}

TEST(SnapshotInternerTest, AnEqualKnownCopyIsReturnedAndAnyOtherIgnored) {
  SnapshotInterner interner;
  const auto base = interner.Intern(Full("req"));
  EXPECT_EQ(interner.Intern(Full("req-2"), base), base);
  EXPECT_EQ(interner.Intern(Full("req-2"), nullptr), base);
  v1::Snapshot other = Full("req");
  other.set_model("other-model");
  const auto other_part = interner.Intern(other);
  // An unequal known copy: the one interned for the content is returned.
  EXPECT_EQ(interner.Intern(Full("req-3"), other_part), base);
  EXPECT_EQ(interner.size(), 2u);
}

TEST(SnapshotInternerTest, PartsNoOneHoldsAreForgotten) {
  SnapshotInterner interner;
  const auto kept = interner.Intern(Full("req"));
  v1::Snapshot other = Full("req");
  other.set_model("other-model");
  interner.Intern(other);  // Dropped at once.
  interner.Sweep();
  EXPECT_EQ(interner.size(), 1u);
  EXPECT_EQ(interner.Intern(Full("req")), kept);
}

}  // namespace
}  // namespace cachewatch
