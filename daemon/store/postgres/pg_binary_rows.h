// PgBinaryRows: rows of values in PostgreSQL's binary wire formats, built a
// value at a time in column order, for the two ways the store sends many
// rows at once:
//   - Layout::kArrays: one array per column (element i of each is row i),
//     each a parameter in the binary array format (array_recv), for a
//     set-based statement that unnests them (pg_write_statements.h);
//   - Layout::kCopy: the rows themselves in COPY's binary format (a header,
//     each row's field count and fields, a trailer), for
//     `COPY table (columns) FROM STDIN (FORMAT binary)`.
// Both carry a value the same way: its length (4 bytes, big-endian; -1 for
// NULL) then its bytes in the binary format of its column's type (text and
// bytea: the bytes; bigint, integer, boolean: big-endian, 8, 4 and 1 bytes).
//
// `types` names the columns' types, a character each: t text, 8 bigint,
// 4 integer, b boolean, y bytea. Every row must give exactly one value per
// column, in order; the values are not checked against the types beyond
// the integers' widths, which the types set.
//
// Not thread-safe; a plain value.
#ifndef CACHEWATCH_DAEMON_STORE_POSTGRES_PG_BINARY_ROWS_H_
#define CACHEWATCH_DAEMON_STORE_POSTGRES_PG_BINARY_ROWS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/store/postgres/pg_connection.h"

namespace cachewatch {

class PgBinaryRows {
 public:
  enum class Layout { kArrays, kCopy };

  PgBinaryRows(std::string_view types, Layout layout);

  // Starts the next row; its values follow in column order.
  PgBinaryRows& Row();
  PgBinaryRows& Text(std::string_view value);
  PgBinaryRows& TextOrNull(std::string_view value);  // Empty -> NULL.
  // A bigint, integer or boolean value, as its column's type has it.
  PgBinaryRows& Int(int64_t value);
  PgBinaryRows& Bool(bool value) { return Int(value ? 1 : 0); }
  PgBinaryRows& BytesOrNull(std::string_view value);  // Empty -> NULL.
  PgBinaryRows& Null();
  PgBinaryRows& Nulls(int count);

  size_t rows() const { return rows_; }

  // kArrays: the arrays as parameters, in column order; a caller appends
  // any scalar parameters after them.
  PgParams Params() const;
  // kCopy: the COPY data, header and trailer included.
  std::string CopyData() const;

 private:
  struct Column {
    char type = 't';
    bool has_null = false;
    std::string data;  // kArrays: the column's elements.
  };

  // Starts the next value with its `length` (0xffffffff: NULL); returns
  // where its bytes go.
  std::string& Next(uint32_t length);

  const Layout layout_;
  std::vector<Column> columns_;
  std::string copy_;  // kCopy: the rows.
  size_t next_ = 0;
  size_t rows_ = 0;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_STORE_POSTGRES_PG_BINARY_ROWS_H_
