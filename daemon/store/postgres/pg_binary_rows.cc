#include "daemon/store/postgres/pg_binary_rows.h"

#include <utility>

namespace cachewatch {
namespace {

void AppendBigEndian(std::string& out, uint64_t value, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) {
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  }
}

int IntBytes(char type) { return type == '8' ? 8 : type == '4' ? 4 : 1; }

uint32_t ElementOid(char type) {
  switch (type) {
    case '8':
      return 20;  // int8
    case '4':
      return 23;  // int4
    case 'b':
      return 16;  // bool
    case 'y':
      return 17;  // bytea
    default:
      return 25;  // text
  }
}

// COPY's binary header: the signature, no flags, no header extension.
constexpr std::string_view kCopySignature("PGCOPY\n\377\r\n\0", 11);

}  // namespace

PgBinaryRows::PgBinaryRows(std::string_view types, Layout layout)
    : layout_(layout), columns_(types.size()) {
  for (size_t c = 0; c < types.size(); ++c) columns_[c].type = types[c];
}

PgBinaryRows& PgBinaryRows::Row() {
  next_ = 0;
  ++rows_;
  if (layout_ == Layout::kCopy) AppendBigEndian(copy_, columns_.size(), 2);
  return *this;
}

std::string& PgBinaryRows::Next(uint32_t length) {
  std::string& out = layout_ == Layout::kCopy ? copy_ : columns_[next_].data;
  ++next_;
  AppendBigEndian(out, length, 4);
  return out;
}

PgBinaryRows& PgBinaryRows::Text(std::string_view value) {
  Next(static_cast<uint32_t>(value.size())).append(value);
  return *this;
}

PgBinaryRows& PgBinaryRows::TextOrNull(std::string_view value) {
  return value.empty() ? Null() : Text(value);
}

PgBinaryRows& PgBinaryRows::Int(int64_t value) {
  const int bytes = IntBytes(columns_[next_].type);
  AppendBigEndian(Next(bytes), static_cast<uint64_t>(value), bytes);
  return *this;
}

PgBinaryRows& PgBinaryRows::BytesOrNull(std::string_view value) {
  return value.empty() ? Null() : Text(value);
}

PgBinaryRows& PgBinaryRows::Null() {
  columns_[next_].has_null = true;
  Next(0xffffffffu);  // A length of -1.
  return *this;
}

PgBinaryRows& PgBinaryRows::Nulls(int count) {
  for (int i = 0; i < count; ++i) Null();
  return *this;
}

PgParams PgBinaryRows::Params() const {
  PgParams params;
  for (const Column& column : columns_) {
    std::string array;
    array.reserve(20 + column.data.size());
    AppendBigEndian(array, 1, 4);  // Dimensions.
    AppendBigEndian(array, column.has_null ? 1 : 0, 4);
    AppendBigEndian(array, ElementOid(column.type), 4);
    AppendBigEndian(array, rows_, 4);
    AppendBigEndian(array, 1, 4);  // Lower bound.
    array += column.data;
    params.Binary(std::move(array));
  }
  return params;
}

std::string PgBinaryRows::CopyData() const {
  std::string data;
  data.reserve(kCopySignature.size() + 8 + copy_.size() + 2);
  data.append(kCopySignature);
  AppendBigEndian(data, 0, 4);  // Flags.
  AppendBigEndian(data, 0, 4);  // Header extension length.
  data += copy_;
  AppendBigEndian(data, 0xffff, 2);  // Trailer: a field count of -1.
  return data;
}

}  // namespace cachewatch
