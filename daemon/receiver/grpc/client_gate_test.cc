#include "daemon/receiver/grpc/client_gate.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace cachewatch {
namespace {

constexpr int64_t kSecond = 1'000'000;

TEST(ClientGateTest, WithoutTokensEveryoneIsTheirPeer) {
  ClientGate gate({});
  EXPECT_FALSE(gate.authenticates());
  EXPECT_EQ(*gate.Authenticate("", "ipv4:127.0.0.1:5000"),
            "ipv4:127.0.0.1:5000");
}

TEST(ClientGateTest, TokensAreRequiredAndChecked) {
  ClientGate gate({{"s3cret-one", "s3cret-two"}, 0});
  EXPECT_EQ(*gate.Authenticate("Bearer s3cret-two", "peer"), "s3cret-two");
  for (const char* bad : {"", "s3cret-one", "Bearer ", "Bearer s3cret",
                          "Bearer s3cret-one-and-more", "bearer s3cret-one"}) {
    EXPECT_EQ(gate.Authenticate(bad, "peer").status().code(),
              absl::StatusCode::kUnauthenticated)
        << bad;
  }
}

TEST(ClientGateTest, RateLimitRefillsOverTime) {
  ClientGate gate({{}, 10});
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(gate.Admit("a", 1, 0).ok()) << i;
  }
  EXPECT_EQ(gate.Admit("a", 1, 0).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(gate.Admit("b", 1, 0).ok());            // Per client.
  EXPECT_TRUE(gate.Admit("a", 1, kSecond / 5).ok());  // Two refilled.
  EXPECT_TRUE(gate.Admit("a", 1, kSecond / 5).ok());
  EXPECT_FALSE(gate.Admit("a", 1, kSecond / 5).ok());
}

TEST(ClientGateTest, NoLimitByDefault) {
  ClientGate gate({});
  for (int i = 0; i < 100000; ++i) ASSERT_TRUE(gate.Admit("a", 1, 0).ok());
}

TEST(ClientGateTest, ReadsTokenFiles) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "cachewatch-tokens").string();
  std::ofstream(path) << "# agents\n  token-a  \n\ntoken-b\n";
  EXPECT_EQ(*ClientGate::ReadTokenFile(path),
            (std::vector<std::string>{"token-a", "token-b"}));
  std::ofstream(path) << "# nothing\n";
  EXPECT_EQ(ClientGate::ReadTokenFile(path).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ClientGate::ReadTokenFile("/nonexistent/tokens").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace cachewatch
