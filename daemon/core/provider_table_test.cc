#include "daemon/core/provider_table.h"

#include <gtest/gtest.h>

#include "daemon/util/enum_name.h"

namespace cachewatch {
namespace {

TEST(ProviderTableTest, EveryProviderHasExactlyOneRow) {
  for (int value = v1::Provider_MIN; value <= v1::Provider_MAX; ++value) {
    if (!v1::Provider_IsValid(value) || value == v1::PROVIDER_UNSPECIFIED) {
      continue;
    }
    int rows = 0;
    for (const ProviderRow& row : ProviderRows()) {
      if (row.provider == value) ++rows;
    }
    EXPECT_EQ(rows, 1) << v1::Provider_Name(value);
  }
}

TEST(ProviderTableTest, UnspecifiedHasNoRow) {
  EXPECT_EQ(FindProvider(v1::PROVIDER_UNSPECIFIED), nullptr);
  EXPECT_EQ(FindProvider(static_cast<v1::Provider>(v1::Provider_MAX + 1)),
            nullptr);
}

TEST(ProviderTableTest, RowsAreInEnumOrderNamedAfterTheEnumWithANormalizer) {
  int previous = v1::PROVIDER_UNSPECIFIED;
  for (const ProviderRow& row : ProviderRows()) {
    EXPECT_GT(row.provider, previous) << row.name;
    previous = row.provider;
    EXPECT_EQ(row.name, EnumText(row.provider)) << row.name;
    EXPECT_NE(row.normalize, nullptr) << row.name;
    EXPECT_EQ(FindProvider(row.provider), &row) << row.name;
  }
}

}  // namespace
}  // namespace cachewatch
