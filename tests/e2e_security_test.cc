// Security end to end: TLS, mutual TLS, bearer tokens, the per-client rate
// limit and the metric label cap, against the real daemon. Certificates
// are made with openssl at test time.
#include <google/protobuf/util/time_util.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>

#include "cachewatch/v1/service.grpc.pb.h"
#include "tests/support/daemon_process.h"

namespace cachewatch {
namespace {

using google::protobuf::util::TimeUtil;
using testing::DaemonProcess;
using testing::HttpGet;
using testing::TempDir;

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

int RunQuietly(const std::string& command) {
  return std::system((command + " >/dev/null 2>&1").c_str());
}

// A CA, a server certificate for 127.0.0.1 and a client certificate, both
// signed by the CA, and a second CA nobody trusts with its own client.
class Certificates {
 public:
  explicit Certificates(const TempDir& dir) : dir_(dir) {
    Make("ca", "");
    Make("server", "ca", "subjectAltName=IP:127.0.0.1");
    Make("client", "ca");
    Make("rogue_ca", "");
    Make("rogue_client", "rogue_ca");
  }
  std::string Path(const std::string& name) const { return dir_.File(name); }
  std::string Pem(const std::string& name) const {
    return ReadFile(dir_.File(name));
  }

 private:
  void Make(const std::string& name, const std::string& issuer,
            const std::string& extension = "") {
    const std::string key = dir_.File(name + ".key");
    const std::string cert = dir_.File(name + ".pem");
    if (issuer.empty()) {
      ASSERT_EQ(
          RunQuietly("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "
                     "/CN=" +
                     name + " -keyout " + key + " -out " + cert),
          0);
      return;
    }
    const std::string csr = dir_.File(name + ".csr");
    ASSERT_EQ(RunQuietly("openssl req -newkey rsa:2048 -nodes -subj /CN=" +
                         name + " -keyout " + key + " -out " + csr),
              0);
    std::string sign = "openssl x509 -req -days 1 -in " + csr + " -CA " +
                       dir_.File(issuer + ".pem") + " -CAkey " +
                       dir_.File(issuer + ".key") + " -CAcreateserial -out " +
                       cert;
    if (!extension.empty()) {
      const std::string ext = dir_.File(name + ".ext");
      std::ofstream(ext) << extension << "\n";
      sign += " -extfile " + ext;
    }
    ASSERT_EQ(RunQuietly(sign), 0);
  }

  const TempDir& dir_;
};

v1::Snapshot Snapshot(const std::string& id, const std::string& model) {
  v1::Snapshot snapshot;
  snapshot.set_agent("secure-agent");
  snapshot.set_session_id("s");
  snapshot.set_request_id(id);
  *snapshot.mutable_request_time() = TimeUtil::GetCurrentTime();
  snapshot.set_provider(v1::PROVIDER_ANTHROPIC);
  snapshot.set_model(model);
  return snapshot;
}

grpc::Status Send(v1::CacheWatch::Stub& stub, const v1::Snapshot& snapshot,
                  const std::string& token = "") {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
  if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
  v1::RecordSnapshotRequest request;
  *request.mutable_snapshot() = snapshot;
  v1::RecordSnapshotResponse response;
  return stub.RecordSnapshot(&context, request, &response);
}

std::unique_ptr<v1::CacheWatch::Stub> TlsStub(const std::string& address,
                                              const Certificates& certs,
                                              const std::string& client_name) {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = certs.Pem("ca.pem");
  if (!client_name.empty()) {
    options.pem_private_key = certs.Pem(client_name + ".key");
    options.pem_cert_chain = certs.Pem(client_name + ".pem");
  }
  return v1::CacheWatch::NewStub(
      grpc::CreateChannel(address, grpc::SslCredentials(options)));
}

TEST(SecurityTest, TlsServesOnlyEncryptedClients) {
  TempDir dir;
  Certificates certs(dir);
  DaemonProcess daemon;
  ASSERT_TRUE(
      daemon.Start(dir.File("db"), {"--tls-cert=" + certs.Path("server.pem"),
                                    "--tls-key=" + certs.Path("server.key")}));
  EXPECT_TRUE(
      Send(*TlsStub(daemon.grpc_address(), certs, ""), Snapshot("tls-1", "m"))
          .ok());
  EXPECT_FALSE(Send(*daemon.NewStub(), Snapshot("plain-1", "m")).ok());
  EXPECT_EQ(daemon.Stop(), 0);
}

TEST(SecurityTest, MutualTlsRefusesClientsWithoutTheRightCertificate) {
  TempDir dir;
  Certificates certs(dir);
  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start(dir.File("db"),
                           {"--tls-cert=" + certs.Path("server.pem"),
                            "--tls-key=" + certs.Path("server.key"),
                            "--tls-client-ca=" + certs.Path("ca.pem")}));
  EXPECT_TRUE(Send(*TlsStub(daemon.grpc_address(), certs, "client"),
                   Snapshot("mtls-1", "m"))
                  .ok());
  EXPECT_FALSE(
      Send(*TlsStub(daemon.grpc_address(), certs, ""), Snapshot("mtls-2", "m"))
          .ok());
  EXPECT_FALSE(Send(*TlsStub(daemon.grpc_address(), certs, "rogue_client"),
                    Snapshot("mtls-3", "m"))
                   .ok());
  EXPECT_EQ(daemon.Stop(), 0);
}

TEST(SecurityTest, BearerTokensAreRequiredAndNothingIsRecordedWithout) {
  TempDir dir;
  std::ofstream(dir.File("tokens")) << "# agents\ngood-token\n";
  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start(dir.File("db"),
                           {"--auth-token-file=" + dir.File("tokens")}));
  auto stub = daemon.NewStub();
  EXPECT_EQ(Send(*stub, Snapshot("t-1", "m")).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Send(*stub, Snapshot("t-2", "m"), "bad-token").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(Send(*stub, Snapshot("t-3", "m"), "good-token").ok());
  grpc::ClientContext context;
  v1::ListBreaksResponse listed;
  EXPECT_EQ(stub->ListBreaks(&context, {}, &listed).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(daemon.Stop(), 0);
  // Only the authenticated snapshot reached the database.
  DaemonProcess reader;
  ASSERT_TRUE(reader.Start(dir.File("db")));
  grpc::ClientContext timeline_context;
  v1::GetLaneTimelineRequest timeline;
  timeline.set_agent("secure-agent");
  timeline.set_session_id("s");
  v1::GetLaneTimelineResponse turns;
  ASSERT_TRUE(reader.NewStub()
                  ->GetLaneTimeline(&timeline_context, timeline, &turns)
                  .ok());
  ASSERT_EQ(turns.turns_size(), 1);
  EXPECT_EQ(turns.turns(0).request_id(), "t-3");
  EXPECT_EQ(reader.Stop(), 0);
}

TEST(SecurityTest, RateLimitPushesBackPerClient) {
  TempDir dir;
  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start(dir.File("db"), {"--rate-limit=5"}));
  auto stub = daemon.NewStub();
  int accepted = 0;
  int limited = 0;
  for (int i = 0; i < 20; ++i) {
    const grpc::Status status =
        Send(*stub, Snapshot("r-" + std::to_string(i), "m"));
    if (status.ok()) ++accepted;
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++limited;
      EXPECT_NE(status.error_message().find("rate limit"), std::string::npos);
    }
  }
  EXPECT_GE(accepted, 5);
  EXPECT_LT(accepted, 15);
  EXPECT_EQ(accepted + limited, 20);
  EXPECT_EQ(daemon.Stop(), 0);
}

TEST(SecurityTest, ThousandsOfModelNamesKeepMetricsBounded) {
  TempDir dir;
  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start(dir.File("db"), {"--max-label-values=50"}));
  auto stub = daemon.NewStub();
  for (int i = 0; i < 2000; ++i) {
    const std::string id = "m-" + std::to_string(i);
    ASSERT_TRUE(Send(*stub, Snapshot(id, "model-" + std::to_string(i))).ok());
    grpc::ClientContext context;
    v1::RecordUsageRequest request;
    v1::Usage* usage = request.mutable_usage();
    usage->set_agent("secure-agent");
    usage->set_session_id("s");
    usage->set_request_id(id);
    *usage->mutable_response_time() = TimeUtil::GetCurrentTime();
    usage->set_provider(v1::PROVIDER_ANTHROPIC);
    usage->mutable_normalized()->set_cache_write_tokens(5000);
    v1::RecordUsageResponse response;
    ASSERT_TRUE(stub->RecordUsage(&context, request, &response).ok());
  }
  const std::string metrics = HttpGet(daemon.metrics_address(), "/metrics");
  std::istringstream lines(metrics);
  int turn_series = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("cachewatch_turns_total{", 0) == 0) ++turn_series;
  }
  // At most 51 model values (50 + "other") times 5 verdicts.
  EXPECT_LE(turn_series, 51 * 5);
  EXPECT_GT(testing::MetricValue(metrics, {"cachewatch_label_overflow_total{",
                                           "label=\"model\""}),
            1000);
  EXPECT_EQ(daemon.Stop(), 0);
}

// 10,000 hostile agent x model pairs, each name 128 bytes (100 agents x
// 100 models: every value within the per-label cap, so only the series cap
// bounds the combinations): the scrape stays within the documented worst
// case, the pairs over the cap are folded into one all-"other" label set
// and counted, and no turn is lost from the totals.
TEST(SecurityTest, TenThousandAgentModelPairsKeepTheScrapeBounded) {
  TempDir dir;
  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start(dir.File("db")));
  auto stub = daemon.NewStub();
  grpc::ClientContext context;
  auto stream = stub->Record(&context);
  constexpr int kPairs = 10000;
  int acked = 0;
  std::thread reader([&] {
    for (v1::RecordAck ack; stream->Read(&ack);) acked += ack.code() == 0;
  });
  auto padded = [](std::string name) {
    name.resize(128, 'x');
    return name;
  };
  for (int i = 0; i < kPairs; ++i) {
    const std::string agent = padded("agent-" + std::to_string(i % 100) + "-");
    const std::string model = padded("model-" + std::to_string(i / 100) + "-");
    const std::string id = "pair-" + std::to_string(i);
    v1::RecordRequest snapshot;
    *snapshot.mutable_snapshot() = Snapshot(id, model);
    snapshot.mutable_snapshot()->set_agent(agent);
    ASSERT_TRUE(stream->Write(snapshot));
    v1::RecordRequest usage;
    v1::Usage* u = usage.mutable_usage();
    u->set_agent(agent);
    u->set_session_id(snapshot.snapshot().session_id());
    u->set_request_id(id);
    *u->mutable_response_time() = TimeUtil::GetCurrentTime();
    u->set_provider(v1::PROVIDER_ANTHROPIC);
    u->set_model(model);
    u->mutable_normalized()->set_cache_write_tokens(5000);
    ASSERT_TRUE(stream->Write(usage));
  }
  stream->WritesDone();
  reader.join();
  ASSERT_TRUE(stream->Finish().ok());
  ASSERT_EQ(acked, 2 * kPairs);

  const std::string metrics = HttpGet(daemon.metrics_address(), "/metrics");
  std::istringstream lines(metrics);
  int samples = 0, turn_series = 0;
  double turns = 0, folded_turns = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    ++samples;
    if (line.starts_with("cachewatch_turns_total{")) {
      ++turn_series;
      const double value = std::stod(line.substr(line.rfind(' ') + 1));
      turns += value;
      if (line.find("agent=\"other\"") != std::string::npos &&
          line.find("model=\"other\"") != std::string::npos) {
        folded_turns += value;
      }
    }
  }
  std::printf("scrape: %zu bytes, %d samples, %d turn series\n", metrics.size(),
              samples, turn_series);
  // docs/METRICS.md: at most 501 label sets per kind, 23 samples per set at
  // worst, a scrape of at most 6 MB.
  EXPECT_LE(turn_series, 501 * 5);
  EXPECT_LE(samples, 501 * 23 + 200);
  EXPECT_LT(metrics.size(), 6'000'000u);
  EXPECT_EQ(turns, kPairs);
  EXPECT_EQ(
      testing::MetricValue(metrics, {"cachewatch_metric_series_overflow_total{",
                                     "family=\"turns\""}),
      kPairs - 500);
  EXPECT_EQ(folded_turns, kPairs - 500);
  EXPECT_EQ(daemon.Stop(), 0);
}

TEST(SecurityTest, CliSpeaksMutualTlsWithATokenAndIsRefusedWithout) {
  TempDir dir;
  Certificates certs(dir);
  std::ofstream(dir.File("tokens")) << "cli-token\n";
  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start(dir.File("db"),
                           {"--tls-cert=" + certs.Path("server.pem"),
                            "--tls-key=" + certs.Path("server.key"),
                            "--tls-client-ca=" + certs.Path("ca.pem"),
                            "--auth-token-file=" + dir.File("tokens")}));
  const std::string cli = std::string(CACHEWATCH_CLI_PATH) + " breaks" +
                          " --address " + daemon.grpc_address() + " --tls-ca " +
                          certs.Path("ca.pem") + " --tls-cert " +
                          certs.Path("client.pem") + " --tls-key " +
                          certs.Path("client.key");
  EXPECT_EQ(RunQuietly(cli + " --token cli-token"), 0);
  EXPECT_NE(RunQuietly(cli + " --token wrong-token"), 0);
  EXPECT_NE(RunQuietly(cli), 0);
  EXPECT_EQ(daemon.Stop(), 0);
}

// Runs `command` with stderr folded into stdout; returns (exit status,
// output).
std::pair<int, std::string> RunCapturing(const std::string& command) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {-1, ""};
  std::string output;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) {
    output.append(buffer, n);
  }
  return {pclose(pipe), output};
}

TEST(SecurityTest, DaemonRefusesToStartWithAnUnreadableTlsFile) {
  TempDir dir;
  Certificates certs(dir);
  const std::string missing = dir.File("missing.key");
  const auto [status, output] =
      RunCapturing(std::string(CACHEWATCHD_BINARY) + " --db=" + dir.File("db") +
                   " --listen=127.0.0.1:0 --metrics-listen= --tls-cert=" +
                   certs.Path("server.pem") + " --tls-key=" + missing);
  // The flag check or ReadFileToString refuses it; either names the file.
  EXPECT_NE(status, 0);
  EXPECT_NE(output.find(missing), std::string::npos) << output;
}

TEST(SecurityTest, CliFailsNamingAnUnreadableTlsFile) {
  TempDir dir;
  const std::string missing = dir.File("missing-ca.pem");
  const auto [status, output] =
      RunCapturing(std::string(CACHEWATCH_CLI_PATH) +
                   " breaks --address 127.0.0.1:1 --tls-ca " + missing);
  EXPECT_NE(status, 0);
  EXPECT_NE(output.find(missing), std::string::npos) << output;
  EXPECT_EQ(output.find("cannot reach"), std::string::npos) << output;
}

TEST(SecurityTest, DatabaseFileIsPrivate) {
  TempDir dir;
  DaemonProcess daemon;
  ASSERT_TRUE(daemon.Start(dir.File("db")));
  struct stat info;
  ASSERT_EQ(stat(dir.File("db").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600);
  EXPECT_EQ(daemon.Stop(), 0);
}

}  // namespace
}  // namespace cachewatch
