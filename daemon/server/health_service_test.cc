// HealthService over a real gRPC server on loopback, called by the
// generated grpc.health.v1 client stub.
#include "daemon/server/health_service.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace cachewatch {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

class HealthServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(&health_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_NE(port, 0);
    stub_ = Health::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                            grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    // Without a deadline: returns once every call has ended, so a Watch
    // that stayed open would hang the test here.
    if (server_ != nullptr) server_->Shutdown();
  }

  // The status Check answers, or the call's error code as a negative value.
  int Check(const std::string& service) {
    grpc::ClientContext context;
    HealthCheckRequest request;
    request.set_service(service);
    HealthCheckResponse response;
    const grpc::Status status = stub_->Check(&context, request, &response);
    return status.ok() ? response.status() : -status.error_code();
  }

  HealthService health_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<Health::Stub> stub_;
};

constexpr int kNotFound = -grpc::StatusCode::NOT_FOUND;

TEST_F(HealthServiceTest, CheckAnswersKnownServicesAndNotFoundForOthers) {
  EXPECT_EQ(Check(""), HealthCheckResponse::SERVING);
  EXPECT_EQ(Check("cachewatch.v1.CacheWatch"), kNotFound);

  health_.SetServingStatus("cachewatch.v1.CacheWatch", true);
  EXPECT_EQ(Check("cachewatch.v1.CacheWatch"), HealthCheckResponse::SERVING);
  health_.SetServingStatus("cachewatch.v1.CacheWatch", false);
  EXPECT_EQ(Check("cachewatch.v1.CacheWatch"),
            HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(Check(""), HealthCheckResponse::SERVING);
  EXPECT_EQ(Check("other"), kNotFound);
}

TEST_F(HealthServiceTest, WatchSendsTheStatusAtOnceThenEachChange) {
  grpc::ClientContext context;
  HealthCheckRequest request;
  request.set_service("cachewatch.v1.CacheWatch");
  auto reader = stub_->Watch(&context, request);
  HealthCheckResponse response;
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVICE_UNKNOWN);

  health_.SetServingStatus("cachewatch.v1.CacheWatch", true);
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  health_.SetServingStatus("cachewatch.v1.CacheWatch", false);
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);

  context.TryCancel();
  while (reader->Read(&response)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // TearDown's Shutdown returns: the server's Watch saw the cancellation.
}

TEST_F(HealthServiceTest, ShutdownSendsNotServingAndEndsWatchCalls) {
  health_.SetServingStatus("cachewatch.v1.CacheWatch", true);
  grpc::ClientContext server_context, unknown_context;
  HealthCheckRequest server_request, unknown_request;
  unknown_request.set_service("unknown");
  auto server_reader = stub_->Watch(&server_context, server_request);
  auto unknown_reader = stub_->Watch(&unknown_context, unknown_request);
  HealthCheckResponse response;
  ASSERT_TRUE(server_reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  ASSERT_TRUE(unknown_reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVICE_UNKNOWN);

  health_.Shutdown();
  ASSERT_TRUE(server_reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  EXPECT_FALSE(server_reader->Read(&response));
  EXPECT_EQ(server_reader->Finish().error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_FALSE(unknown_reader->Read(&response));
  EXPECT_EQ(unknown_reader->Finish().error_code(),
            grpc::StatusCode::UNAVAILABLE);

  // Check keeps answering, NOT_SERVING for every known service.
  EXPECT_EQ(Check(""), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(Check("cachewatch.v1.CacheWatch"),
            HealthCheckResponse::NOT_SERVING);
}

TEST_F(HealthServiceTest, StatusChangesAfterShutdownAreIgnored) {
  health_.SetServingStatus("cachewatch.v1.CacheWatch", true);
  health_.Shutdown();
  health_.SetServingStatus("", true);
  health_.SetServingStatus("cachewatch.v1.CacheWatch", true);
  health_.SetServingStatus("later", true);
  health_.Shutdown();  // Idempotent.
  EXPECT_EQ(Check(""), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(Check("cachewatch.v1.CacheWatch"),
            HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(Check("later"), kNotFound);

  // A Watch started after Shutdown gets the status and ends at once.
  grpc::ClientContext context;
  HealthCheckRequest request;
  auto reader = stub_->Watch(&context, request);
  HealthCheckResponse response;
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  EXPECT_FALSE(reader->Read(&response));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace cachewatch
