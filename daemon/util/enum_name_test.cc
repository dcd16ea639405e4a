#include "daemon/util/enum_name.h"

#include <gtest/gtest.h>

#include "cachewatch/v1/break.pb.h"
#include "cachewatch/v1/snapshot.pb.h"

namespace cachewatch {
namespace {

TEST(EnumTextTest, LowerCaseWithoutTheTypePrefix) {
  EXPECT_EQ(EnumText(v1::VERDICT_COLD_START), "cold_start");
  EXPECT_EQ(EnumText(v1::VERDICT_BELOW_MIN_CACHEABLE), "below_min_cacheable");
  EXPECT_EQ(EnumText(v1::REASON_TOOLS_ORDER_CHANGED), "tools_order_changed");
  EXPECT_EQ(EnumText(v1::PROVIDER_AGREEMENT_DISAGREE), "disagree");
  EXPECT_EQ(EnumText(v1::PROVIDER_ANTHROPIC), "anthropic");
}

TEST(EnumTextTest, UnspecifiedAndUnknownValuesGetTheFallback) {
  EXPECT_EQ(EnumText(v1::VERDICT_UNSPECIFIED), "");
  EXPECT_EQ(EnumText(v1::VERDICT_UNSPECIFIED, "unspecified"), "unspecified");
  EXPECT_EQ(EnumText(static_cast<v1::Reason>(999), "unspecified"),
            "unspecified");
}

TEST(EnumTextTest, ParsesBackEveryNamedValue) {
  for (int value = 1; value < v1::Verdict_ARRAYSIZE; ++value) {
    const auto verdict = static_cast<v1::Verdict>(value);
    EXPECT_EQ(ParseEnumText<v1::Verdict>(EnumText(verdict)), verdict);
  }
  EXPECT_EQ(ParseEnumText<v1::Verdict>(""), std::nullopt);
  EXPECT_EQ(ParseEnumText<v1::Verdict>("unspecified"), std::nullopt);
  EXPECT_EQ(ParseEnumText<v1::Verdict>("BREAK"), std::nullopt);
}

enum class Color { kRed, kBlue, kGreen };
constexpr EnumNames<Color, 2> kColorNames = {{
    {Color::kRed, "red"},
    {Color::kBlue, "blue"},
}};

TEST(EnumNamesTest, ReadsTheTableBothWays) {
  static_assert(EnumName(kColorNames, Color::kBlue) == "blue");
  EXPECT_EQ(EnumName(kColorNames, Color::kGreen), "unknown");
  EXPECT_EQ(EnumFromName(kColorNames, "red"), Color::kRed);
  EXPECT_EQ(EnumFromName(kColorNames, "green"), std::nullopt);
}

}  // namespace
}  // namespace cachewatch
