// echo_server: the throughput baseline. A bare gRPC server of the same
// cachewatch.v1.CacheWatch service, with the same message types, whose
// RecordSnapshot, RecordUsage and Record answer OK at once: no validation,
// no tracking, no store. The query RPCs are left unimplemented.
//
// Usage: echo_server [--listen=127.0.0.1:0]
// Prints {"msg":"listening","grpc":"HOST:PORT"} on stderr once it serves
// (the line cachewatchd prints), and stops on SIGTERM or SIGINT.
#include <grpcpp/grpcpp.h>
#include <pthread.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "cachewatch/v1/service.grpc.pb.h"

namespace cachewatch::bench {
namespace {

class EchoService final : public v1::CacheWatch::Service {
 public:
  grpc::Status RecordSnapshot(grpc::ServerContext*,
                              const v1::RecordSnapshotRequest*,
                              v1::RecordSnapshotResponse*) override {
    return grpc::Status::OK;
  }

  grpc::Status RecordUsage(grpc::ServerContext*,
                           const v1::RecordUsageRequest* request,
                           v1::RecordUsageResponse* response) override {
    if (!request->has_usage()) return grpc::Status::OK;
    response->mutable_classification()->set_verdict(v1::VERDICT_OK);
    return grpc::Status::OK;
  }

  grpc::Status Record(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::RecordAck, v1::RecordRequest>* stream)
      override {
    v1::RecordRequest request;
    v1::RecordAck ack;
    while (stream->Read(&request)) {
      ack.Clear();
      if (request.has_usage()) {
        ack.set_request_id(request.usage().request_id());
        ack.set_is_usage(true);
        ack.mutable_classification()->set_verdict(v1::VERDICT_OK);
      } else {
        ack.set_request_id(request.snapshot().request_id());
      }
      if (!stream->Write(ack)) break;
    }
    return grpc::Status::OK;
  }
};

int Main(int argc, char** argv) {
  std::string listen = "127.0.0.1:0";
  for (int i = 1; i < argc; ++i) {
    constexpr char kFlag[] = "--listen=";
    if (std::strncmp(argv[i], kFlag, sizeof(kFlag) - 1) == 0) {
      listen = argv[i] + sizeof(kFlag) - 1;
    } else {
      std::fprintf(stderr, "usage: echo_server [--listen=HOST:PORT]\n");
      return 2;
    }
  }
  // Block the stop signals before gRPC starts its threads; sigwait below.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  EchoService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(4 << 20);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "{\"msg\":\"cannot serve gRPC\"}\n");
    return 1;
  }
  const std::string host = listen.substr(0, listen.rfind(':'));
  std::fprintf(stderr, "{\"msg\":\"listening\",\"grpc\":\"%s:%d\"}\n",
               host.c_str(), port);
  std::fflush(stderr);
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return 0;
}

}  // namespace
}  // namespace cachewatch::bench

int main(int argc, char** argv) { return cachewatch::bench::Main(argc, argv); }
