// Reads a server-sent event stream (the WHATWG "text/event-stream" format)
// as the provider sent it: a leading byte-order mark is skipped; lines end
// in CRLF, LF or CR; a line starting with
// ':' is a comment (pings); "field: value" with at most one space removed
// after the colon; several data lines join with '\n'; a blank line ends an
// event. An event still open when the stream ends (a cut stream) is not
// returned; ended_mid_event() says that it happened.
//
// Not thread-safe; the reader views `stream`, which must outlive it.
#ifndef CACHEWATCH_DAEMON_RECEIVER_PROXY_SSE_READER_H_
#define CACHEWATCH_DAEMON_RECEIVER_PROXY_SSE_READER_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace cachewatch {

struct SseEvent {
  std::string type;  // The "event" field; empty when the event had none.
  std::string data;  // The data lines, joined with '\n'.
};

class SseReader {
 public:
  explicit SseReader(std::string_view stream)
      : stream_(stream.substr(0, 3) == "\xEF\xBB\xBF" ? stream.substr(3)
                                                      : stream) {}

  // The next complete event into *event; false at the end of the stream.
  bool Next(SseEvent* event);

  // After Next returned false: whether the stream ended inside an event
  // (fields read but no blank line after them).
  bool ended_mid_event() const { return ended_mid_event_; }

 private:
  // The next line without its terminator; false at the end of the stream.
  // *terminated is false for a last line without a line end.
  bool NextLine(std::string_view* line, bool* terminated);

  std::string_view stream_;
  size_t position_ = 0;
  bool ended_mid_event_ = false;
};

}  // namespace cachewatch

#endif  // CACHEWATCH_DAEMON_RECEIVER_PROXY_SSE_READER_H_
