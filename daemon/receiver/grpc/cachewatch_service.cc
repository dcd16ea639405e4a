#include "daemon/receiver/grpc/cachewatch_service.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace cachewatch {
namespace {

// Records a stream may have read but not yet committed; the reader waits
// beyond this (flow control back to the client).
constexpr size_t kMaxStreamInFlight = 4096;

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

v1::RecordAck AckFor(const ProcessedRecord& record) {
  v1::RecordAck ack;
  ack.set_request_id(record.request_id);
  ack.set_is_usage(record.kind == RecordKind::kUsage);
  ack.set_code(static_cast<int32_t>(record.status.code()));
  ack.set_message(std::string(record.status.message()));
  if (record.status.ok()) {
    ack.set_duplicate(record.duplicate);
    if (record.kind == RecordKind::kUsage)
      *ack.mutable_classification() = record.classification;
  }
  return ack;
}

}  // namespace

absl::StatusOr<std::string> CacheWatchService::Authenticate(
    grpc::ServerContext* context) const {
  const auto& metadata = context->client_metadata();
  auto it = metadata.find("authorization");
  const std::string authorization =
      it == metadata.end() ? ""
                           : std::string(it->second.data(), it->second.size());
  return gate_->Authenticate(authorization, context->peer());
}

absl::Status CacheWatchService::Admit(grpc::ServerContext* context,
                                      RecordKind kind) {
  absl::StatusOr<std::string> client = Authenticate(context);
  absl::Status status = client.status();
  if (status.ok()) status = gate_->Admit(*client, 1, clock_->NowMicros());
  if (!status.ok()) pipeline_->Reject(kind, status);
  return status;
}

grpc::Status CacheWatchService::RecordSnapshot(
    grpc::ServerContext* context, const v1::RecordSnapshotRequest* request,
    v1::RecordSnapshotResponse* response) {
  if (absl::Status admitted = Admit(context, RecordKind::kSnapshot);
      !admitted.ok()) {
    return ToGrpc(admitted);
  }
  ProcessedRecord record =
      request->has_snapshot()
          ? pipeline_->ProcessSnapshot(request->snapshot())
          : pipeline_->Reject(RecordKind::kSnapshot,
                              absl::InvalidArgumentError("snapshot: required"));
  pipeline_->Commit({&record});
  response->set_duplicate(record.duplicate);
  return ToGrpc(record.status);
}

grpc::Status CacheWatchService::RecordUsage(
    grpc::ServerContext* context, const v1::RecordUsageRequest* request,
    v1::RecordUsageResponse* response) {
  if (absl::Status admitted = Admit(context, RecordKind::kUsage);
      !admitted.ok()) {
    return ToGrpc(admitted);
  }
  ProcessedRecord record =
      request->has_usage()
          ? pipeline_->ProcessUsage(request->usage())
          : pipeline_->Reject(RecordKind::kUsage,
                              absl::InvalidArgumentError("usage: required"));
  pipeline_->Commit({&record});
  response->set_duplicate(record.duplicate);
  *response->mutable_classification() = record.classification;
  return ToGrpc(record.status);
}

// The reader thread (this handler) tracks each record as it arrives; a
// committer thread makes everything read so far durable in one store write
// and then acknowledges it, so a busy stream commits in batches.
grpc::Status CacheWatchService::Record(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<v1::RecordAck, v1::RecordRequest>* stream) {
  const absl::StatusOr<std::string> client = Authenticate(context);
  if (!client.ok()) {
    pipeline_->Reject(RecordKind::kSnapshot, client.status());
    return ToGrpc(client.status());
  }
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<ProcessedRecord> in_flight;  // Guarded by mutex.
  bool reading = true;                    // Guarded by mutex.
  bool writable = true;                   // Guarded by mutex.

  std::thread committer([&] {
    for (;;) {
      std::deque<ProcessedRecord> batch;
      {
        std::unique_lock<std::mutex> lock(mutex);
        changed.wait(lock, [&] { return !in_flight.empty() || !reading; });
        if (in_flight.empty()) return;
        batch.swap(in_flight);
      }
      changed.notify_all();
      std::vector<ProcessedRecord*> pointers;
      for (ProcessedRecord& record : batch) pointers.push_back(&record);
      pipeline_->Commit(pointers);
      for (const ProcessedRecord& record : batch) {
        if (!stream->Write(AckFor(record))) {
          std::lock_guard<std::mutex> lock(mutex);
          writable = false;
          break;
        }
      }
    }
  });

  v1::RecordRequest request;
  while (stream->Read(&request)) {
    const absl::Status admitted = gate_->Admit(*client, 1, clock_->NowMicros());
    ProcessedRecord record =
        !admitted.ok()
            ? pipeline_->Reject(request.has_usage() ? RecordKind::kUsage
                                                    : RecordKind::kSnapshot,
                                admitted)
        : request.has_snapshot()
            ? pipeline_->ProcessSnapshot(std::move(*request.mutable_snapshot()))
        : request.has_usage()
            ? pipeline_->ProcessUsage(std::move(*request.mutable_usage()))
            : pipeline_->Reject(
                  RecordKind::kSnapshot,
                  absl::InvalidArgumentError("record: one of snapshot or "
                                             "usage is required"));
    if (record.request_id.empty()) {
      record.request_id = request.has_usage() ? request.usage().request_id()
                                              : request.snapshot().request_id();
    }
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] {
      return in_flight.size() < kMaxStreamInFlight || !writable;
    });
    if (!writable) break;
    in_flight.push_back(std::move(record));
    changed.notify_all();
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    reading = false;
  }
  changed.notify_all();
  committer.join();
  return grpc::Status::OK;
}

grpc::Status CacheWatchService::ListBreaks(grpc::ServerContext* context,
                                           const v1::ListBreaksRequest* request,
                                           v1::ListBreaksResponse* response) {
  if (auto client = Authenticate(context); !client.ok()) {
    return ToGrpc(client.status());
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
  if (request->break_id().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "break_id: required");
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
        return grpc::Status::OK;
    }
  }
  return grpc::Status::OK;
}

grpc::Status CacheWatchService::GetLaneTimeline(
    grpc::ServerContext* context, const v1::GetLaneTimelineRequest* request,
    v1::GetLaneTimelineResponse* response) {
  if (auto client = Authenticate(context); !client.ok()) {
    return ToGrpc(client.status());
  }
  if (request->agent().empty() || request->session_id().empty()) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        request->agent().empty() ? "agent: required" : "session_id: required");
  }
  const LaneKey key = LaneKeyOf(*request);
  absl::StatusOr<v1::GetLaneTimelineResponse> result =
      queries_->LaneTimeline(key, request->limit());
  if (!result.ok()) return ToGrpc(result.status());
  *response = *std::move(result);
  return grpc::Status::OK;
}

}  // namespace cachewatch
