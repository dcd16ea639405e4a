#include "daemon/exporter/prometheus/exposer.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "daemon/core/test_turns.h"
#include "daemon/exporter/prometheus/turn_metrics.h"
#include "daemon/telemetry/telemetry.h"
#include "daemon/telemetry/test_scrape.h"

namespace cachewatch {
namespace {

using ::cachewatch::testing::BaseSnapshot;
using ::cachewatch::testing::Find;
using ::cachewatch::testing::MakeTurn;
using ::cachewatch::testing::ParseExposition;
using ::cachewatch::testing::Sample;
using ::cachewatch::testing::Usage;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// The whole response to "GET `path` HTTP/1.0" on 127.0.0.1:`port`, or "" on
// a connection error.
std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  timeval timeout{.tv_sec = 10, .tv_usec = 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address),
              sizeof(address)) == 0) {
    const std::string request =
        "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (send(fd, request.data(), request.size(), 0) ==
        static_cast<ssize_t>(request.size())) {
      char buffer[4096];
      ssize_t n;
      while ((n = recv(fd, buffer, sizeof(buffer), 0)) > 0) {
        response.append(buffer, static_cast<size_t>(n));
      }
    }
  }
  close(fd);
  return response;
}

// The body of a response.
std::string Body(const std::string& response) {
  const size_t end = response.find("\r\n\r\n");
  return end == std::string::npos ? "" : response.substr(end + 4);
}

// Turn metrics that have seen a break, a provider diagnostic and a priced
// break, and telemetry that has seen some ingest, so that every kind of
// series is in a scrape.
void Populate(TurnMetrics& metrics, Telemetry& telemetry) {
  v1::Snapshot snapshot = BaseSnapshot("r2", 30);
  ClassifiedTurn turn{
      LaneKeyOf(snapshot), MakeTurn(snapshot, Usage(0, 20000, 10)), {}};
  turn.classification.set_verdict(v1::VERDICT_BREAK);
  v1::PromptCacheBreak& event = *turn.classification.mutable_cache_break();
  event.set_primary_reason(v1::REASON_TOOLS_ORDER_CHANGED);
  event.set_missed_tokens(20000);
  event.set_has_estimated_cost(true);
  event.set_estimated_extra_cost_usd(0.06);
  event.set_provider_agreement(v1::PROVIDER_AGREEMENT_AGREE);
  metrics.OnTurnClassified(turn);
  telemetry.OnIngest(RecordKind::kUsage, IngestOutcome::kAccepted);
  telemetry.ObserveStoreCommit(0.002, 2, true);
}

class ExposerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Populate(metrics_, telemetry_);
    auto exposer = StartExposer("127.0.0.1:0", registry_);
    ASSERT_TRUE(exposer.ok()) << exposer.status();
    exposer_ = *std::move(exposer);
    const std::vector<int> ports = exposer_->GetListeningPorts();
    ASSERT_EQ(ports.size(), 1u);
    port_ = ports[0];
  }

  std::shared_ptr<prometheus::Registry> registry_ =
      std::make_shared<prometheus::Registry>();
  TurnMetrics metrics_{MetricsOptions{}, registry_};
  Telemetry telemetry_{registry_, "1.2.3"};
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

TEST_F(ExposerTest, ServesTheRegistryOnMetrics) {
  const std::string response = HttpGet(port_, "/metrics");
  ASSERT_THAT(response, StartsWith("HTTP/1.1 200"));
  const std::vector<Sample> samples = ParseExposition(Body(response));
  EXPECT_EQ(Find(samples, "cachewatch_build_info", {{"version", "1.2.3"}}), 1);
  EXPECT_EQ(Find(samples, "cachewatch_breaks_total",
                 {{"agent", "agent"},
                  {"provider", "anthropic"},
                  {"model", "claude-sonnet-4-5"},
                  {"reason", "tools_order_changed"}}),
            1);
}

TEST_F(ExposerTest, PromtoolAcceptsTheScrape) {
  if (std::system("command -v promtool > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "promtool is not on PATH";
  }
  const std::string body = Body(HttpGet(port_, "/metrics"));
  ASSERT_THAT(body, HasSubstr("cachewatch_turns_total"));
  const std::string path = ::testing::TempDir() + "/metrics_scrape.txt";
  std::ofstream(path) << body;
  FILE* promtool =
      popen(("promtool check metrics < " + path + " 2>&1").c_str(), "r");
  ASSERT_NE(promtool, nullptr);
  std::string output;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), promtool)) > 0) {
    output.append(buffer, n);
  }
  const int status = pclose(promtool);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  EXPECT_EQ(output, "");
}

TEST_F(ExposerTest, TakenPortIsUnavailable) {
  auto second =
      StartExposer("127.0.0.1:" + std::to_string(port_), metrics_.registry());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
}

TEST(StartExposerTest, RejectsAnEmptyAddressOrNoRegistry) {
  EXPECT_EQ(StartExposer("", std::make_shared<prometheus::Registry>())
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(StartExposer("127.0.0.1:0", nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cachewatch
