#include "daemon/store/columns.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <nlohmann/json.hpp>
#include <string>

#include "daemon/core/classifier.h"
#include "daemon/core/provider_traits.h"

namespace cachewatch {
namespace {

TEST(ColumnsTest, Hex64RoundTrips) {
  for (uint64_t value : {0ULL, 1ULL, 0xfedcba9876543210ULL, ~0ULL}) {
    const std::string text = Hex64(value);
    EXPECT_EQ(text.size(), 16u);
    EXPECT_EQ(ParseHex64(text), value) << text;
  }
  EXPECT_EQ(Hex64(0xab), "00000000000000ab");
  EXPECT_EQ(Hex64(0xfedcba9876543210ULL), "fedcba9876543210");
}

TEST(ColumnsTest, ParseHex64RejectsAnythingButSixteenHexDigits) {
  const char* const kBad[] = {"",
                              "ab",
                              "00000000000000abc",
                              "0x000000000000ab",
                              "-000000000000001",
                              "00000000000000zz",
                              " 00000000000000a"};
  for (const char* text : kBad) {
    EXPECT_EQ(ParseHex64(text), std::nullopt) << text;
  }
}

TEST(ColumnsTest, EnumTextMatchesTheCoreNames) {
  for (int i = 0; i < v1::Provider_descriptor()->value_count(); ++i) {
    const auto provider = static_cast<v1::Provider>(
        v1::Provider_descriptor()->value(i)->number());
    if (provider == v1::PROVIDER_UNSPECIFIED) continue;
    EXPECT_EQ(EnumText(provider), ProviderName(provider));
    EXPECT_EQ(ParseEnumText<v1::Provider>(ProviderName(provider)), provider);
  }
  for (int i = 0; i < v1::Reason_descriptor()->value_count(); ++i) {
    const auto reason =
        static_cast<v1::Reason>(v1::Reason_descriptor()->value(i)->number());
    if (reason == v1::REASON_UNSPECIFIED) continue;
    EXPECT_EQ(EnumText(reason), ReasonName(reason));
    EXPECT_EQ(ParseEnumText<v1::Reason>(ReasonName(reason)), reason);
  }
}

TEST(ColumnsTest, EnumTextSpellings) {
  EXPECT_EQ(EnumText(v1::VERDICT_COLD_START), "cold_start");
  EXPECT_EQ(EnumText(v1::VERDICT_BELOW_MIN_CACHEABLE), "below_min_cacheable");
  EXPECT_EQ(EnumText(v1::EXPECTED_DROP_ABORTED_PREVIOUS), "aborted_previous");
  EXPECT_EQ(EnumText(v1::EVIDENCE_PROVIDER_SUSPECTED), "provider_suspected");
  EXPECT_EQ(EnumText(v1::PROVIDER_AGREEMENT_DISAGREE), "disagree");
  EXPECT_EQ(EnumText(v1::PROMPT_SEGMENT_MESSAGES), "messages");
  EXPECT_EQ(EnumText(v1::VERDICT_UNSPECIFIED), "");
  EXPECT_EQ(ParseEnumText<v1::Verdict>(""), std::nullopt);
  EXPECT_EQ(ParseEnumText<v1::Verdict>("unspecified"), std::nullopt);
  EXPECT_EQ(ParseEnumText<v1::Verdict>("BREAK"), std::nullopt);
}

TEST(ColumnsTest, ToolListHashDependsOnOrderNamesAndSchemas) {
  v1::Snapshot a;
  auto add = [](v1::Snapshot& snapshot, const char* name, uint64_t hash) {
    v1::ToolRef* tool = snapshot.add_tools();
    tool->set_name(name);
    tool->set_schema_hash(hash);
  };
  add(a, "Read", 1);
  add(a, "Write", 2);
  v1::Snapshot reordered;
  add(reordered, "Write", 2);
  add(reordered, "Read", 1);
  v1::Snapshot schema;
  add(schema, "Read", 1);
  add(schema, "Write", 3);
  // Length prefixes keep name boundaries apart.
  v1::Snapshot split;
  add(split, "ReadW", 1);
  add(split, "rite", 2);

  const std::string hash = ToolListHash(a.tools());
  EXPECT_EQ(hash.size(), 16u);
  EXPECT_EQ(hash, ToolListHash(a.tools()));
  EXPECT_NE(hash, ToolListHash(reordered.tools()));
  EXPECT_NE(hash, ToolListHash(schema.tools()));
  EXPECT_NE(hash, ToolListHash(split.tools()));
  EXPECT_NE(hash, ToolListHash(v1::Snapshot().tools()));
}

TEST(ColumnsTest, ToolListHashIsXxh3OfTheListsBytes) {
  v1::Snapshot snapshot;
  v1::ToolRef* tool = snapshot.add_tools();
  tool->set_name("Read");
  tool->set_schema_hash(0x0102030405060708ULL);
  tool = snapshot.add_tools();
  tool->set_name("mcp__workspace__a_tool_name_longer_than_a_word");
  tool->set_schema_hash(0xfedcba9876543210ULL);
  // The layout the header states, which stored lists are addressed by.
  auto layout = [](const v1::Snapshot& s) {
    std::string bytes;
    for (const v1::ToolRef& t : s.tools()) {
      const uint32_t size = static_cast<uint32_t>(t.name().size());
      for (int i = 0; i < 4; ++i)
        bytes.push_back(static_cast<char>(size >> (8 * i)));
      bytes += t.name();
      for (int i = 0; i < 8; ++i) {
        bytes.push_back(static_cast<char>(t.schema_hash() >> (8 * i)));
      }
    }
    return Hex64(XXH3_64bits(bytes.data(), bytes.size()));
  };
  EXPECT_EQ(ToolListHash(snapshot.tools()), layout(snapshot));
  // Lists longer than the function's 4 KiB buffer, and names longer than
  // it, hash the same bytes.
  for (int tools : {200, 400}) {
    v1::Snapshot large;
    for (int i = 0; i < tools; ++i) {
      tool = large.add_tools();
      tool->set_name(std::string(static_cast<size_t>(i % 61), 'a' + i % 26));
      tool->set_schema_hash(0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(i));
      if (i == 150) tool->set_name(std::string(5000 + tools, 'n'));
      if (i == 151) tool->set_name(std::string(4096 - 12, 'm'));
    }
    EXPECT_EQ(ToolListHash(large.tools()), layout(large)) << tools;
  }
}

TEST(ColumnsTest, SectionsRoundTripThroughJson) {
  v1::Snapshot snapshot;
  v1::SystemSection* section = snapshot.add_system_sections();
  section->set_name("date \"quoted\"");
  section->set_hash(~0ULL);
  section = snapshot.add_system_sections();
  section->set_name("tools");
  section->set_hash(0x0123456789abcdefULL);
  const std::string json = SectionsJson(snapshot.system_sections());
  EXPECT_EQ(json, R"([{"name":"date \"quoted\"","hash":"ffffffffffffffff"},)"
                  R"({"name":"tools","hash":"0123456789abcdef"}])");
  v1::Snapshot parsed;
  ASSERT_TRUE(ParseSectionsJson(json, parsed.mutable_system_sections()).ok());
  EXPECT_EQ(parsed.SerializeAsString(), snapshot.SerializeAsString());
  EXPECT_EQ(SectionsJson(v1::Snapshot().system_sections()), "");
}

TEST(ColumnsTest, BreakpointsRoundTripThroughJson) {
  v1::CacheControl control;
  v1::Breakpoint* breakpoint = control.add_breakpoints();
  breakpoint->set_segment(v1::PROMPT_SEGMENT_SYSTEM);
  breakpoint->set_index(4);
  breakpoint->set_ttl_seconds(3600);
  v1::Breakpoint* at_end = control.add_breakpoints();
  at_end->set_segment(v1::PROMPT_SEGMENT_TOOLS);
  at_end->set_index(7);
  at_end->set_blocks_after(0);
  const std::string json = BreakpointsJson(control.breakpoints());
  EXPECT_EQ(
      json,
      R"([{"segment":"system","index":4,"ttl_seconds":3600},)"
      R"({"segment":"tools","index":7,"ttl_seconds":0,"blocks_after":0}])");
  v1::CacheControl parsed;
  ASSERT_TRUE(ParseBreakpointsJson(json, parsed.mutable_breakpoints()).ok());
  EXPECT_EQ(parsed.SerializeAsString(), control.SerializeAsString());
}

// Rows written before blocks_after was stored read back without it.
TEST(ColumnsTest, BreakpointsWithoutBlocksAfterReadBackWithout) {
  v1::CacheControl parsed;
  ASSERT_TRUE(ParseBreakpointsJson(
                  R"([{"segment":"system","index":4,"ttl_seconds":300}])",
                  parsed.mutable_breakpoints())
                  .ok());
  ASSERT_EQ(parsed.breakpoints_size(), 1);
  EXPECT_FALSE(parsed.breakpoints(0).has_blocks_after());
  EXPECT_EQ(parsed.breakpoints(0).index(), 4u);
}

// Section names as ordered_json would write them, escapes included.
TEST(ColumnsTest, SectionNamesAreEscapedAsJson) {
  const std::string kNames[] = {"plain",
                                "quote \"q\"",
                                "back\\slash",
                                "line\nbreak\ttab",
                                std::string("nul\0x", 5),
                                "\x1f unit",
                                "caf\xc3\xa9 \xe2\x82\xac",
                                "del \x7f",
                                ""};
  for (const std::string& name : kNames) {
    v1::Snapshot snapshot;
    v1::SystemSection* section = snapshot.add_system_sections();
    section->set_name(name);
    section->set_hash(0x0123456789abcdefULL);
    const nlohmann::ordered_json want = nlohmann::ordered_json::array(
        {{{"name", name}, {"hash", "0123456789abcdef"}}});
    const std::string json = SectionsJson(snapshot.system_sections());
    EXPECT_EQ(json, want.dump()) << name;
    v1::Snapshot parsed;
    ASSERT_TRUE(ParseSectionsJson(json, parsed.mutable_system_sections()).ok())
        << json;
    EXPECT_EQ(parsed.system_sections(0).name(), name);
  }
}

TEST(ColumnsTest, MalformedJsonColumnsAreDataLoss) {
  const char* const kBadSections[] = {
      "",
      "{}",
      "[1]",
      R"([{"name":"a"}])",
      R"([{"name":"a","hash":"xyz"}])",
      R"([{"name":1,"hash":"0000000000000001"}])"};
  for (const char* json : kBadSections) {
    v1::Snapshot snapshot;
    EXPECT_TRUE(absl::IsDataLoss(
        ParseSectionsJson(json, snapshot.mutable_system_sections())))
        << json;
  }
  const char* const kBadBreakpoints[] = {
      "[", R"([{"segment":"tools","index":-1,"ttl_seconds":0}])",
      R"([{"segment":"nowhere","index":0,"ttl_seconds":0}])",
      R"([{"segment":"tools","index":0,"ttl_seconds":4294967296}])",
      R"([{"segment":"tools","index":0,"ttl_seconds":0,"blocks_after":"0"}])"};
  for (const char* json : kBadBreakpoints) {
    v1::CacheControl control;
    EXPECT_TRUE(absl::IsDataLoss(
        ParseBreakpointsJson(json, control.mutable_breakpoints())))
        << json;
  }
}

TEST(ColumnsTest, ChainBlobIsEightBytesLittleEndianPerBlock) {
  v1::Snapshot snapshot;
  snapshot.add_message_chain(0x0102030405060708ULL);
  snapshot.add_message_chain(~0ULL);
  const std::string blob = ChainBlob(snapshot.message_chain());
  ASSERT_EQ(blob.size(), 16u);
  EXPECT_EQ(blob.substr(0, 8), std::string("\x08\x07\x06\x05\x04\x03\x02\x01"));
  v1::Snapshot parsed;
  ASSERT_TRUE(ParseChainBlob(blob, parsed.mutable_message_chain()).ok());
  EXPECT_EQ(parsed.SerializeAsString(), snapshot.SerializeAsString());
  EXPECT_TRUE(absl::IsDataLoss(
      ParseChainBlob("1234567", parsed.mutable_message_chain())));
}

TEST(ColumnsTest, NameListsAreJsonArrays) {
  v1::PromptCacheBreak event;
  EXPECT_EQ(NamesJson(event.changed_tool_names()), "[]");
  event.add_changed_tool_names("Read");
  event.add_changed_tool_names("mcp__x");
  EXPECT_EQ(NamesJson(event.changed_tool_names()), R"(["Read","mcp__x"])");
  event.add_reasons(v1::REASON_TOOLS_ORDER_CHANGED);
  event.add_reasons(v1::REASON_TTL_EXPIRED);
  EXPECT_EQ(ReasonsJson(event.reasons()),
            R"(["tools_order_changed","ttl_expired"])");
}

}  // namespace
}  // namespace cachewatch
