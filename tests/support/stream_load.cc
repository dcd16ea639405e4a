#include "tests/support/stream_load.h"

#include "cachewatch/v1/service.grpc.pb.h"
#include "tests/support/stored_rows.h"
#include "tests/support/turn_records.h"

namespace cachewatch::testing {

struct StreamLoad::Stream {
  std::unique_ptr<v1::CacheWatch::Stub> stub;
  grpc::ClientContext context;
  grpc::Status status;
  std::thread thread;
};

StreamLoad::StreamLoad(const std::string& address, const std::string& agent,
                       const std::string& session_prefix, int streams,
                       int first_turn) {
  for (int c = 0; c < streams; ++c) {
    auto stream = std::make_unique<Stream>();
    stream->stub = v1::CacheWatch::NewStub(
        grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
    Stream* raw = stream.get();
    const std::string session = session_prefix + "-" + std::to_string(c);
    streams_.push_back(std::move(stream));
    raw->thread = std::thread([this, raw, agent, session, first_turn] {
      Run(*raw, agent, session, first_turn);
    });
  }
}

StreamLoad::~StreamLoad() { Stop(); }

void StreamLoad::Run(Stream& stream, const std::string& agent,
                     const std::string& session, int first_turn) {
  auto call = stream.stub->Record(&stream.context);
  std::thread reader([&] {
    v1::RecordAck ack;
    while (call->Read(&ack)) {
      if (ack.code() != 0) continue;
      std::lock_guard<std::mutex> lock(mutex_);
      acked_.insert((ack.is_usage() ? "u/" : "s/") + ack.request_id());
    }
  });
  for (int turn = first_turn; !stopping_; ++turn) {
    v1::RecordRequest snapshot;
    *snapshot.mutable_snapshot() = TurnSnapshot(agent, session, turn);
    v1::RecordRequest usage;
    *usage.mutable_usage() = TurnUsage(agent, session, turn);
    const std::string id = snapshot.snapshot().request_id();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      sent_.insert("s/" + id);
    }
    if (!call->Write(snapshot)) break;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      sent_.insert("u/" + id);
    }
    if (!call->Write(usage)) break;
  }
  call->WritesDone();
  reader.join();
  stream.status = call->Finish();
}

void StreamLoad::Stop() {
  stopping_ = true;
  Join();
}

void StreamLoad::Join() {
  for (auto& stream : streams_) {
    if (stream->thread.joinable()) stream->thread.join();
  }
}

std::set<std::string> StreamLoad::sent() {
  std::lock_guard<std::mutex> lock(mutex_);
  return sent_;
}

std::set<std::string> StreamLoad::acked() {
  std::lock_guard<std::mutex> lock(mutex_);
  return acked_;
}

size_t StreamLoad::acked_count() {
  std::lock_guard<std::mutex> lock(mutex_);
  return acked_.size();
}

std::vector<grpc::Status> StreamLoad::statuses() {
  std::vector<grpc::Status> statuses;
  for (auto& stream : streams_) statuses.push_back(stream->status);
  return statuses;
}

std::set<std::string> StoredRecordKeys(const std::string& db_path) {
  return StoredRowSet(
      db_path,
      "SELECT 's/' || request_id FROM turns WHERE snapshot_received = 1 "
      "UNION ALL "
      "SELECT 'u/' || request_id FROM turns WHERE usage_received = 1");
}

}  // namespace cachewatch::testing
