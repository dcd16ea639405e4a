#include "daemon/config/config.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/core/provider_table.h"

namespace cachewatch {
namespace {

std::variant<Config, ConfigExit> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "cachewatchd");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  return ParseConfig(static_cast<int>(argv.size()), argv.data(), "1.2.3");
}

Config MustParse(std::vector<std::string> args) {
  auto parsed = Parse(std::move(args));
  if (auto* exit = std::get_if<ConfigExit>(&parsed)) {
    ADD_FAILURE() << exit->message;
    return Config{};
  }
  return std::get<Config>(parsed);
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path =
      (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path) << text;
  return path;
}

TEST(ConfigTest, DefaultsAreSafe) {
  const Config config = MustParse({});
  EXPECT_EQ(config.listen, "127.0.0.1:50051");
  EXPECT_EQ(config.metrics_listen, "127.0.0.1:9464");
  EXPECT_EQ(config.store.path, "./cachewatch.db");
  EXPECT_EQ(config.classifier.min_missed_tokens, 2000);
  EXPECT_DOUBLE_EQ(config.classifier.min_missed_ratio, 0.05);
}

TEST(ConfigTest, TtlAcceptsEveryProviderOfTheTable) {
  for (const ProviderRow& row : ProviderRows()) {
    const Config config = MustParse({"--ttl", std::string(row.name) + "=3600"});
    EXPECT_EQ(config.classifier.default_ttl_seconds.at(row.provider), 3600u)
        << row.name;
  }
}

TEST(ConfigTest, FlagsSetEverything) {
  const Config config =
      MustParse({"--listen", "0.0.0.0:7000", "--db-path", "/tmp/x.db",
                 "--min-missed-tokens", "500", "--ttl", "openai=600", "--price",
                 "claude-sonnet-4-5=3,3.75,6,0.3", "--pending-timeout-seconds",
                 "30", "--usage-grace-seconds", "5", "--group-commit-us", "500",
                 "--synchronous-full", "true"});
  EXPECT_EQ(config.listen, "0.0.0.0:7000");
  EXPECT_EQ(config.store.path, "/tmp/x.db");
  EXPECT_EQ(config.classifier.min_missed_tokens, 500);
  EXPECT_EQ(config.classifier.default_ttl_seconds.at(v1::PROVIDER_OPENAI),
            600u);
  EXPECT_DOUBLE_EQ(
      config.classifier.prices.at("claude-sonnet-4-5").cache_write_5m, 3.75);
  EXPECT_EQ(config.tracker.pending_timeout_us, 30'000'000);
  EXPECT_EQ(config.tracker.usage_grace_us, 5'000'000);
  EXPECT_EQ(config.store.max_batch_delay.count(), 500);
  EXPECT_TRUE(config.store.synchronous_full);
}

TEST(ConfigTest, ASingleValuedFlagGivenTwiceTakesTheLast) {
  EXPECT_EQ(
      MustParse({"--listen=127.0.0.1:0", "--listen=127.0.0.1:7007"}).listen,
      "127.0.0.1:7007");
}

// Durations given in seconds are kept in microseconds, from every source;
// their defaults show in --help as seconds.
TEST(ConfigTest, SecondsFlagsKeepMicroseconds) {
  const Config defaults = MustParse({});
  EXPECT_EQ(defaults.tracker.pending_timeout_us, 600'000'000);
  EXPECT_EQ(defaults.tracker.idle_lane_timeout_us, 7'200'000'000);
  const std::string path =
      WriteFile("cachewatch-seconds-test.yaml", "usage-grace-seconds: 7\n");
  setenv("CACHEWATCH_IDLE_LANE_SECONDS", "60", 1);
  const Config config =
      MustParse({"--config", path, "--pending-timeout-seconds", "9",
                 "--pending-timeout-seconds", "10"});
  unsetenv("CACHEWATCH_IDLE_LANE_SECONDS");
  EXPECT_EQ(config.tracker.pending_timeout_us, 10'000'000);
  EXPECT_EQ(config.tracker.usage_grace_us, 7'000'000);
  EXPECT_EQ(config.tracker.idle_lane_timeout_us, 60'000'000);
  auto help = Parse({"--help"});
  ASSERT_TRUE(std::holds_alternative<ConfigExit>(help));
  EXPECT_NE(std::get<ConfigExit>(help).message.find(
                "--pending-timeout-seconds INT:POSITIVE=600 "),
            std::string::npos)
      << std::get<ConfigExit>(help).message;
  auto zero = Parse({"--idle-lane-seconds", "0"});
  ASSERT_TRUE(std::holds_alternative<ConfigExit>(zero));
  EXPECT_NE(std::get<ConfigExit>(zero).message.find("idle-lane-seconds"),
            std::string::npos);
}

TEST(ConfigTest, YamlFileThenEnvironmentThenFlags) {
  const std::string path = WriteFile("cachewatch-config-test.yaml", R"(
db_path: /var/lib/cachewatch/file.db
listen: 127.0.0.1:6000
min-missed-ratio: 0.2
prices:
  gpt-5.1: {input: 1.25, cache_write_5m: 1.25, cache_write_1h: 1.25, cache_read: 0.125}
ttl:
  anthropic: 3600
)");
  setenv("CACHEWATCH_LISTEN", "127.0.0.1:6001", 1);
  Config config = MustParse({"--config", path});
  EXPECT_EQ(config.store.path, "/var/lib/cachewatch/file.db");
  EXPECT_EQ(config.listen, "127.0.0.1:6001");  // Environment over file.
  EXPECT_DOUBLE_EQ(config.classifier.min_missed_ratio, 0.2);
  EXPECT_DOUBLE_EQ(config.classifier.prices.at("gpt-5.1").cache_read, 0.125);
  EXPECT_EQ(config.classifier.default_ttl_seconds.at(v1::PROVIDER_ANTHROPIC),
            3600u);
  config = MustParse({"--config", path, "--listen", "127.0.0.1:6002"});
  EXPECT_EQ(config.listen, "127.0.0.1:6002");  // Flag over environment.
  unsetenv("CACHEWATCH_LISTEN");
}

TEST(ConfigTest, BadValuesAreClearErrors) {
  struct Case {
    std::vector<std::string> args;
    const char* mention;
  };
  const Case cases[] = {
      {{"--price", "claude=3,x,6,0.3"}, "MODEL=INPUT,WRITE_5M,WRITE_1H,READ"},
      {{"--ttl", "nosuch=300"}, "PROVIDER=SECONDS"},
      {{"--min-missed-ratio", "2"}, "min-missed-ratio"},
      {{"--log-level", "loud"}, "log-level"},
      {{"--no-such-flag"}, "no-such-flag"},
      {{"--config", "/nonexistent/cachewatch.yaml"}, "cachewatch.yaml"},
      {{"--proxy-upstream", "openai=ftp://x"}, "--proxy-upstream 'openai=ftp"},
      {{"--proxy-upstream", "openai=https://a", "--proxy-upstream",
        "openai=https://b"},
       "given twice"},
  };
  for (const Case& c : cases) {
    auto parsed = Parse(c.args);
    ASSERT_TRUE(std::holds_alternative<ConfigExit>(parsed)) << c.mention;
    const ConfigExit& exit = std::get<ConfigExit>(parsed);
    EXPECT_NE(exit.exit_code, 0);
    EXPECT_NE(exit.message.find(c.mention), std::string::npos) << exit.message;
  }
}

// `--flag=` is an empty value, never a bare flag taking the next argument
// as its value (CLI11 reads it so).
TEST(ConfigTest, AnEmptyValueLeavesAnOptionalFlagUnset) {
  const std::string cert = WriteFile("cachewatch-empty.pem", "pem");
  const Config config = MustParse(
      {"--metrics-listen=", "--listen", "0.0.0.0:7000",
       "--tls-cert=", "--tls-key=", "--store=", "--proxy-listen=", "--config=",
       "--auth-token-file=", "--max-lanes", "9", "--proxy-upstream-ca="});
  EXPECT_EQ(config.metrics_listen, "");
  EXPECT_EQ(config.listen, "0.0.0.0:7000");
  EXPECT_EQ(config.tls_cert, "");
  EXPECT_EQ(config.tls_key, "");
  EXPECT_EQ(config.store_url, "");
  EXPECT_EQ(config.proxy.listen, "");
  EXPECT_EQ(config.auth_token_file, "");
  EXPECT_EQ(config.proxy.upstream_ca, "");
  EXPECT_EQ(config.tracker.max_lanes, 9u);
  // Last on the command line, too; and an empty value replaces a set one.
  EXPECT_EQ(MustParse({"--metrics-listen=1.2.3.4:5", "--metrics-listen="})
                .metrics_listen,
            "");
  EXPECT_EQ(MustParse({"--tls-cert=", "--tls-cert", cert, "--tls-key", cert})
                .tls_cert,
            cert);
}

TEST(ConfigTest, AnEmptyValueOfAFlagThatNeedsOneIsAnErrorNamingIt) {
  for (const char* flag :
       {"--listen=", "--db-path=", "--max-lanes=", "--retention-hours=",
        "--pending-timeout-seconds=", "--log-level=", "--ttl=",
        "--synchronous-full=", "--proxy-upstream="}) {
    auto parsed = Parse({flag, "--metrics-listen", "127.0.0.1:1"});
    ASSERT_TRUE(std::holds_alternative<ConfigExit>(parsed)) << flag;
    const ConfigExit& exit = std::get<ConfigExit>(parsed);
    EXPECT_NE(exit.exit_code, 0);
    const std::string name(flag, std::string_view(flag).size() - 1);
    EXPECT_NE(exit.message.find(name + ": needs a value"), std::string::npos)
        << exit.message;
  }
}

// The PostgreSQL statement timeout, in milliseconds from every source; a
// value that is not a positive number is an error naming the flag.
TEST(ConfigTest, StoreTimeoutIsMillisecondsAndPositive) {
  EXPECT_EQ(MustParse({}).store_timeout_ms, 10000);
  EXPECT_EQ(MustParse({"--store-timeout-ms", "250"}).store_timeout_ms, 250);
  const std::string path =
      WriteFile("cachewatch-store-timeout.yaml", "store-timeout-ms: 30000\n");
  EXPECT_EQ(MustParse({"--config", path}).store_timeout_ms, 30000);
  setenv("CACHEWATCH_STORE_TIMEOUT_MS", "1500", 1);
  EXPECT_EQ(MustParse({"--config", path}).store_timeout_ms, 1500);
  unsetenv("CACHEWATCH_STORE_TIMEOUT_MS");
  for (const char* bad : {"0", "-5", "5s", "soon", ""}) {
    auto parsed = Parse({"--store-timeout-ms", bad});
    ASSERT_TRUE(std::holds_alternative<ConfigExit>(parsed)) << bad;
    const ConfigExit& exit = std::get<ConfigExit>(parsed);
    EXPECT_NE(exit.exit_code, 0) << bad;
    EXPECT_NE(exit.message.find("--store-timeout-ms"), std::string::npos)
        << bad << ": " << exit.message;
  }
  auto help = Parse({"--help"});
  ASSERT_TRUE(std::holds_alternative<ConfigExit>(help));
  EXPECT_NE(std::get<ConfigExit>(help).message.find(
                "--store-timeout-ms INT:POSITIVE=10000 "),
            std::string::npos)
      << std::get<ConfigExit>(help).message;
}

TEST(ConfigTest, ProxyIsOffByDefaultAndSetByFlagsOrYaml) {
  EXPECT_EQ(MustParse({}).proxy.listen, "");
  const Config flags = MustParse(
      {"--proxy-listen", "127.0.0.1:8787", "--proxy-upstream",
       "anthropic=http://127.0.0.1:9000", "--proxy-upstream",
       "/deepseek=https://api.deepseek.com", "--proxy-request-diagnostics",
       "true", "--proxy-observe-queue", "7"});
  EXPECT_EQ(flags.proxy.listen, "127.0.0.1:8787");
  EXPECT_EQ(flags.proxy.upstreams,
            (std::vector<std::string>{"anthropic=http://127.0.0.1:9000",
                                      "/deepseek=https://api.deepseek.com"}));
  EXPECT_TRUE(flags.proxy.request_diagnostics);
  EXPECT_EQ(flags.proxy.observe_queue, 7u);
  const std::string path = WriteFile("cachewatch-proxy.yaml", R"(
proxy_listen: 127.0.0.1:8788
proxy_upstream:
  - openai=https://dashscope-intl.aliyuncs.com/compatible-mode
  - /kimi=https://api.moonshot.ai
)");
  const Config file = MustParse({"--config", path});
  EXPECT_EQ(file.proxy.listen, "127.0.0.1:8788");
  EXPECT_EQ(file.proxy.upstreams,
            (std::vector<std::string>{
                "openai=https://dashscope-intl.aliyuncs.com/compatible-mode",
                "/kimi=https://api.moonshot.ai"}));
}

TEST(ConfigTest, MalformedYamlIsAnError) {
  const std::string path =
      WriteFile("cachewatch-bad.yaml", "listen: [unclosed\n");
  auto parsed = Parse({"--config", path});
  ASSERT_TRUE(std::holds_alternative<ConfigExit>(parsed));
  EXPECT_NE(std::get<ConfigExit>(parsed).exit_code, 0);
}

TEST(ConfigTest, HelpAndVersionExitZero) {
  auto help = Parse({"--help"});
  ASSERT_TRUE(std::holds_alternative<ConfigExit>(help));
  EXPECT_EQ(std::get<ConfigExit>(help).exit_code, 0);
  EXPECT_NE(std::get<ConfigExit>(help).message.find("CACHEWATCH_"),
            std::string::npos);
  EXPECT_NE(std::get<ConfigExit>(help).message.find("--db-path"),
            std::string::npos);
  auto version = Parse({"--version"});
  ASSERT_TRUE(std::holds_alternative<ConfigExit>(version));
  EXPECT_EQ(std::get<ConfigExit>(version).exit_code, 0);
  EXPECT_NE(std::get<ConfigExit>(version).message.find("1.2.3"),
            std::string::npos);
}

}  // namespace
}  // namespace cachewatch
