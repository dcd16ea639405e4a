#include "daemon/receiver/proxy/sse_reader.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace cachewatch {
namespace {

struct Read {
  std::vector<SseEvent> events;
  bool ended_mid_event;
};

Read ReadAll(std::string_view stream) {
  SseReader reader(stream);
  Read read;
  SseEvent event;
  while (reader.Next(&event)) read.events.push_back(event);
  read.ended_mid_event = reader.ended_mid_event();
  return read;
}

TEST(SseReaderTest, EventsWithTypesAndData) {
  const Read read = ReadAll(
      "event: message_start\ndata: {\"a\":1}\n\nevent: ping\ndata: {}\n\n");
  ASSERT_EQ(read.events.size(), 2u);
  EXPECT_EQ(read.events[0].type, "message_start");
  EXPECT_EQ(read.events[0].data, "{\"a\":1}");
  EXPECT_EQ(read.events[1].type, "ping");
  EXPECT_FALSE(read.ended_mid_event);
}

TEST(SseReaderTest, LineEndsCrLfLfAndCr) {
  for (const std::string_view stream :
       {"data: x\r\n\r\ndata: y\r\n\r\n", "data: x\n\ndata: y\n\n",
        "data: x\r\rdata: y\r\r", "data: x\r\n\ndata: y\n\r\n"}) {
    SCOPED_TRACE(stream);
    const Read read = ReadAll(stream);
    ASSERT_EQ(read.events.size(), 2u);
    EXPECT_EQ(read.events[0].data, "x");
    EXPECT_EQ(read.events[1].data, "y");
    EXPECT_FALSE(read.ended_mid_event);
  }
}

TEST(SseReaderTest, MultiLineDataJoinsWithNewline) {
  const Read read = ReadAll("data: {\"a\":\ndata:1}\n\n");
  ASSERT_EQ(read.events.size(), 1u);
  EXPECT_EQ(read.events[0].data, "{\"a\":\n1}");
}

TEST(SseReaderTest, CommentsAndBlankLinesAreSkipped) {
  const Read read = ReadAll(": ping\n\n\n:\ndata: x\n: inside\n\n");
  ASSERT_EQ(read.events.size(), 1u);
  EXPECT_EQ(read.events[0].data, "x");
}

TEST(SseReaderTest, OnlyOneSpaceAfterTheColonIsRemoved) {
  const Read read = ReadAll("data:  two\n\ndata:none\n\n");
  ASSERT_EQ(read.events.size(), 2u);
  EXPECT_EQ(read.events[0].data, " two");
  EXPECT_EQ(read.events[1].data, "none");
}

TEST(SseReaderTest, CutStreamDropsTheOpenEventAndSaysSo) {
  for (const std::string_view stream :
       {"data: x\n\ndata: {\"half", "data: x\n\ndata: y\n",
        "data: x\n\nevent: message_delta\n"}) {
    SCOPED_TRACE(stream);
    const Read read = ReadAll(stream);
    ASSERT_EQ(read.events.size(), 1u);
    EXPECT_EQ(read.events[0].data, "x");
    EXPECT_TRUE(read.ended_mid_event);
  }
}

TEST(SseReaderTest, LeadingByteOrderMarkIsSkipped) {
  const Read read = ReadAll(
      "\xEF\xBB\xBF"
      "data: x\n\n");
  ASSERT_EQ(read.events.size(), 1u);
  EXPECT_EQ(read.events[0].data, "x");
}

TEST(SseReaderTest, EmptyStream) {
  const Read read = ReadAll("");
  EXPECT_TRUE(read.events.empty());
  EXPECT_FALSE(read.ended_mid_event);
}

}  // namespace
}  // namespace cachewatch
