#include "daemon/receiver/proxy/sse_reader.h"

namespace cachewatch {

bool SseReader::NextLine(std::string_view* line, bool* terminated) {
  if (position_ >= stream_.size()) return false;
  const size_t end = stream_.find_first_of("\r\n", position_);
  if (end == std::string_view::npos) {
    *line = stream_.substr(position_);
    *terminated = false;
    position_ = stream_.size();
    return true;
  }
  *line = stream_.substr(position_, end - position_);
  *terminated = true;
  position_ = end + 1;
  if (stream_[end] == '\r' && position_ < stream_.size() &&
      stream_[position_] == '\n') {
    ++position_;
  }
  return true;
}

bool SseReader::Next(SseEvent* event) {
  event->type.clear();
  event->data.clear();
  bool has_fields = false;
  bool has_data = false;
  std::string_view line;
  bool terminated = true;
  while (NextLine(&line, &terminated)) {
    if (!terminated) break;  // A last line without its end: cut mid-event.
    if (line.empty()) {
      if (has_fields) return true;
      continue;
    }
    if (line.front() == ':') continue;  // A comment.
    const size_t colon = line.find(':');
    std::string_view field = line.substr(0, colon);
    std::string_view value;
    if (colon != std::string_view::npos) {
      value = line.substr(colon + 1);
      if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    }
    has_fields = true;
    if (field == "event") {
      event->type.assign(value);
    } else if (field == "data") {
      if (has_data) event->data.push_back('\n');
      event->data.append(value);
      has_data = true;
    }
  }
  ended_mid_event_ = has_fields || !terminated;
  return false;
}

}  // namespace cachewatch
