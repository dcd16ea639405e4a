#include "daemon/receiver/grpc/cachewatch_service.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <utility>

#include "daemon/receiver/grpc/grpc_status.h"

namespace cachewatch {

CacheWatchService::CacheWatchService(IngestPipeline* pipeline,
                                     BreakQueries* queries, BreakHub* hub,
                                     ClientGate* gate, const Clock* clock)
    : pipeline_(pipeline),
      queries_(queries),
      hub_(hub),
      gate_(gate),
      clock_(clock),
      unary_(
          pipeline,
          [this](grpc::ServerContext* context, grpc::ByteBuffer* request,
                 grpc::ServerAsyncResponseWriter<grpc::ByteBuffer>* responder,
                 grpc::CompletionQueue* call_queue,
                 grpc::ServerCompletionQueue* new_call_queue, void* tag) {
            RequestRecordSnapshot(context, request, responder, call_queue,
                                  new_call_queue, tag);
          },
          [this](grpc::ServerContext* context, grpc::ByteBuffer* request,
                 grpc::ServerAsyncResponseWriter<grpc::ByteBuffer>* responder,
                 grpc::CompletionQueue* call_queue,
                 grpc::ServerCompletionQueue* new_call_queue, void* tag) {
            RequestRecordUsage(context, request, responder, call_queue,
                               new_call_queue, tag);
          },
          [this](grpc::ServerContext* context, RecordKind kind) {
            return Admit(context, kind);
          }),
      streams_(
          pipeline, gate, clock,
          [this](grpc::ServerContext* context, RecordCall* call,
                 grpc::ServerCompletionQueue* queue, void* tag) {
            RequestRecord(context, call, queue, queue, tag);
          },
          [this](grpc::ServerContextBase* context) {
            return Authenticate(context);
          }) {}

absl::StatusOr<std::string> CacheWatchService::Authenticate(
    grpc::ServerContextBase* context) const {
  const auto& metadata = context->client_metadata();
  auto it = metadata.find("authorization");
  const std::string authorization =
      it == metadata.end() ? ""
                           : std::string(it->second.data(), it->second.size());
  return gate_->Authenticate(authorization, context->peer());
}

void CacheWatchService::BeginShutdown() {
  shutting_down_ = true;
  streams_.StopAll();
}

absl::Status CacheWatchService::Admit(grpc::ServerContext* context,
                                      RecordKind kind) {
  absl::StatusOr<std::string> client = Authenticate(context);
  absl::Status status = client.status();
  if (status.ok() && shutting_down_) {
    status =
        absl::UnavailableError(RecordStream::StoppingStatus().error_message());
  }
  if (status.ok()) status = gate_->Admit(*client, 1, clock_->NowMicros());
  if (!status.ok()) pipeline_->Reject(kind, status);
  return status;
}

void CacheWatchService::StartRecordStreams() {
  // As many threads as gRPC 1.51 gave the callback API: half the cores,
  // at least 2, at most 16.
  const int threads = std::clamp(
      static_cast<int>(std::thread::hardware_concurrency() / 2), 2, 16);
  streams_.Start(threads);
  // A call of each method requested ahead per queue thread.
  unary_.Start(streams_.queue(), threads);
}

void CacheWatchService::StopRecordQueue() {
  unary_.StopAccepting();
  unary_.WaitUntilAnswered();
  streams_.Shutdown();
}

grpc::Status CacheWatchService::ListBreaks(grpc::ServerContext* context,
                                           const v1::ListBreaksRequest* request,
                                           v1::ListBreaksResponse* response) {
  if (auto client = Authenticate(context); !client.ok()) {
    return ToGrpc(client.status());
  }
  if (absl::Status valid =
          ValidateListBreaksRequest(*request, pipeline_->limits());
      !valid.ok()) {
    return ToGrpc(valid);
  }
  absl::StatusOr<v1::ListBreaksResponse> result =
      queries_->ListBreaks(*request);
  if (!result.ok()) return ToGrpc(result.status());
  *response = *std::move(result);
  return grpc::Status::OK;
}

grpc::Status CacheWatchService::ExplainBreak(
    grpc::ServerContext* context, const v1::ExplainBreakRequest* request,
    v1::ExplainBreakResponse* response) {
  if (auto client = Authenticate(context); !client.ok()) {
    return ToGrpc(client.status());
  }
  if (absl::Status valid =
          ValidateExplainBreakRequest(*request, pipeline_->limits());
      !valid.ok()) {
    return ToGrpc(valid);
  }
  absl::StatusOr<v1::ExplainBreakResponse> result =
      queries_->ExplainBreak(request->break_id());
  if (!result.ok()) return ToGrpc(result.status());
  *response = *std::move(result);
  return grpc::Status::OK;
}

grpc::Status CacheWatchService::WatchBreaks(
    grpc::ServerContext* context, const v1::WatchBreaksRequest* request,
    grpc::ServerWriter<v1::PromptCacheBreak>* writer) {
  if (auto client = Authenticate(context); !client.ok()) {
    return ToGrpc(client.status());
  }
  if (absl::Status valid =
          ValidateWatchBreaksRequest(*request, pipeline_->limits());
      !valid.ok()) {
    return ToGrpc(valid);
  }
  std::shared_ptr<BreakHub::Subscription> subscription =
      hub_->Subscribe(*request);
  v1::PromptCacheBreak next;
  while (!context->IsCancelled() && !shutting_down_) {
    switch (subscription->Next(std::chrono::milliseconds(200), &next)) {
      case BreakHub::NextResult::kBreak:
        if (!writer->Write(next)) return grpc::Status::OK;
        break;
      case BreakHub::NextResult::kTimeout:
        break;
      case BreakHub::NextResult::kOverflowed:
        return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                            "watch: fell too far behind the break stream; "
                            "reconnect and catch up with ListBreaks");
      case BreakHub::NextResult::kClosed:
        return RecordStream::StoppingStatus();
    }
  }
  return shutting_down_ ? RecordStream::StoppingStatus() : grpc::Status::OK;
}

grpc::Status CacheWatchService::GetLaneTimeline(
    grpc::ServerContext* context, const v1::GetLaneTimelineRequest* request,
    v1::GetLaneTimelineResponse* response) {
  if (auto client = Authenticate(context); !client.ok()) {
    return ToGrpc(client.status());
  }
  if (absl::Status valid =
          ValidateLaneTimelineRequest(*request, pipeline_->limits());
      !valid.ok()) {
    return ToGrpc(valid);
  }
  const LaneKey key = LaneKeyOf(*request);
  absl::StatusOr<v1::GetLaneTimelineResponse> result =
      queries_->LaneTimeline(key, request->limit());
  if (!result.ok()) return ToGrpc(result.status());
  *response = *std::move(result);
  return grpc::Status::OK;
}

}  // namespace cachewatch
