// The bytes PgBinaryRows builds, against PostgreSQL's binary formats as its
// documentation spells them (COPY's "Binary Format"; array_recv's header).
// The server's side of the same rows (COPY into the store's tables, arrays
// unnested) is exercised by store_postgres_test.
#include "daemon/store/postgres/pg_binary_rows.h"

#include <gtest/gtest.h>

#include <string>

namespace cachewatch {
namespace {

using std::string_literals::operator""s;

TEST(PgBinaryRowsTest, CopyDataIsHeaderRowsAndTrailer) {
  PgBinaryRows rows("t84by", PgBinaryRows::Layout::kCopy);
  rows.Row().Text("ab").Int(-2).Int(258).Bool(true).BytesOrNull("");
  rows.Row().TextOrNull("").Null().Nulls(1).Bool(false).BytesOrNull("\x01"s);
  EXPECT_EQ(rows.rows(), 2u);
  const std::string null = "\377\377\377\377"s;  // A length of -1.
  const std::string expected =
      "PGCOPY\n\377\r\n\0"s +  // Signature.
      "\0\0\0\0\0\0\0\0"s +    // Flags, header extension length.
      "\0\5"s +                // Row 1: five fields.
      "\0\0\0\2ab"s +          // Text: length, bytes.
      "\0\0\0\10\377\377\377\377\377\377\377\376"s +  // bigint, big-endian.
      "\0\0\0\4\0\0\1\2"s +                           // integer: 4 bytes.
      "\0\0\0\1\1"s +                                 // boolean: 1 byte.
      null +                                          // An empty bytea.
      "\0\5"s +                                       // Row 2.
      null + null + null +  // An empty text, Null(), Nulls(1).
      "\0\0\0\1\0"s +       // false.
      "\0\0\0\1\1"s +       // bytea \x01.
      "\377\377"s;          // Trailer: a field count of -1.
  EXPECT_EQ(rows.CopyData(), expected);
}

TEST(PgBinaryRowsTest, ArraysAreOneParameterPerColumn) {
  PgBinaryRows rows("t8", PgBinaryRows::Layout::kArrays);
  rows.Row().Text("x").Int(1);
  rows.Row().Null().Int(2);
  const PgParams params = rows.Params();
  ASSERT_EQ(params.size(), 2);
  EXPECT_EQ(params.formats()[0], 1);  // Binary.
  EXPECT_EQ(*params.values()[0],
            "\0\0\0\1"s +              // One dimension.
                "\0\0\0\1"s +          // Has a NULL.
                "\0\0\0\31"s +         // Element type: text (25).
                "\0\0\0\2\0\0\0\1"s +  // Two elements, from index 1.
                "\0\0\0\1x"s +         // Element 1.
                "\377\377\377\377"s);  // Element 2: NULL.
  EXPECT_EQ(*params.values()[1],
            "\0\0\0\1\0\0\0\0\0\0\0\24"s +  // No NULL; int8 (20).
                "\0\0\0\2\0\0\0\1"s + "\0\0\0\10\0\0\0\0\0\0\0\1"s +
                "\0\0\0\10\0\0\0\0\0\0\0\2"s);
}

}  // namespace
}  // namespace cachewatch
