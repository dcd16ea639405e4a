// Reporter: sends an agent's snapshots and usages to cachewatchd over one
// long-lived Record stream, without ever blocking or failing the agent.
//
// Typical use, one reporter per process:
//
//   cachewatch::client::Reporter reporter({.address = "127.0.0.1:50051"});
//   reporter.ReportSnapshot(*std::move(snapshot));  // Before the request.
//   reporter.ReportUsage(std::move(usage));         // After the response.
//
// ReportSnapshot and ReportUsage only put the record in a bounded in-memory
// queue and return. A background thread streams the queue to the daemon and
// keeps each record until the daemon acknowledges it as durable:
//   - When the stream breaks (the daemon is down, restarted, unreachable), the
//     thread reconnects with exponential backoff and jitter and first sends
//     again the records that were sent but not acknowledged. The daemon is
//     idempotent per (lane, request id), so a record sent twice is stored
//     once.
//   - An ack with code RESOURCE_EXHAUSTED or UNAVAILABLE (the daemon's store
//     is full or down) sends that record again after a backoff. Any other
//     non-OK code (INVALID_ARGUMENT: a malformed record) is final: the record
//     is counted as rejected and not sent again.
//   - When max_queued_records records wait to be sent, a new record is
//     dropped; the records already queued are kept.
// Nothing is hidden: each Report* call counts once in `enqueued` or
// `dropped`, and each enqueued record ends in `acked` or `rejected` unless
// the reporter is destroyed first (ReporterStats).
//
// Thread-safe: any number of threads may call any method concurrently.
// ReportSnapshot and ReportUsage never wait on the network and never throw:
// they copy the record and hold the reporter's mutex for O(1) bookkeeping.
// Flush and the destructor block, for at most the time they are given.

#ifndef CACHEWATCH_CLIENT_REPORTER_H_
#define CACHEWATCH_CLIENT_REPORTER_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "cachewatch/v1/service.grpc.pb.h"

namespace cachewatch::client {

struct ReporterOptions {
  // The daemon's gRPC address. Default: "127.0.0.1:50051".
  std::string address = "127.0.0.1:50051";
  // Default (null): insecure credentials.
  std::shared_ptr<grpc::ChannelCredentials> credentials{};
  // Records waiting to be sent beyond which a new record is dropped.
  // Default: 10000.
  size_t max_queued_records = 10000;
  // Backoff, exponential with jitter, from initial_backoff up to
  // max_backoff and back to initial_backoff after a success: between
  // connection attempts while the daemon is unreachable, before a new stream
  // after one broke, and before sending again records the daemon could not
  // store yet. Defaults: 100 ms and 10 s; at least 1 ms, and max_backoff at
  // least initial_backoff.
  std::chrono::milliseconds initial_backoff{100};
  std::chrono::milliseconds max_backoff{10000};
  // Records sent but not yet acknowledged, kept to be sent again after a
  // reconnection; the reporter sends no more until acks come back.
  // Default: 1000; at least 1.
  size_t max_unacked_records = 1000;
  // How long the destructor waits for the records still outstanding to be
  // acknowledged before it discards them. Default: 2 s.
  std::chrono::milliseconds flush_timeout{2000};
};

// Counters since the reporter was made.
struct ReporterStats {
  uint64_t enqueued = 0;    // Records accepted by Report*.
  uint64_t sent = 0;        // Records handed to a stream, resends included.
  uint64_t acked = 0;       // Records the daemon acknowledged as durable.
  uint64_t rejected = 0;    // Records refused for good (INVALID_ARGUMENT, ...).
  uint64_t retried = 0;     // Resends: after a reconnection or a retryable ack.
  uint64_t dropped = 0;     // Records refused by Report* (queue full).
  uint64_t reconnects = 0;  // Streams opened after the first.
  bool connected = false;   // A stream to the daemon is open.
};

class Reporter {
 public:
  // Starts the background thread; connects when the first record arrives.
  explicit Reporter(ReporterOptions options);

  Reporter(const Reporter&) = delete;
  Reporter& operator=(const Reporter&) = delete;

  // Waits up to options.flush_timeout for the records outstanding (as Flush
  // does), then closes the stream and stops the background thread; records
  // still unacknowledged are discarded.
  ~Reporter();

  // Enqueues the record. Returns false, and counts a drop, when the queue is
  // full. Never blocks on the network and never throws.
  bool ReportSnapshot(v1::Snapshot snapshot);
  bool ReportUsage(v1::Usage usage);

  // Waits up to `timeout` until every record enqueued before the call is
  // acknowledged or rejected. Returns true if all were.
  bool Flush(std::chrono::milliseconds timeout);

  ReporterStats stats() const;

  // False from a stream that broke (the stream stays open while the
  // reporter is idle, so a daemon that dies then is noticed too), records
  // outstanding on a channel in TRANSIENT_FAILURE, or a retryable ack
  // (UNAVAILABLE, RESOURCE_EXHAUSTED), until the daemon acknowledges a
  // record again or, with nothing outstanding, its channel is READY again
  // (asking for it starts a connection attempt). FleetReporter routes lanes
  // around an unhealthy daemon.
  bool Healthy() const;

 private:
  // A record as sent; immutable once enqueued, shared by the queues and the
  // stream writing it.
  using Record = std::shared_ptr<const v1::RecordRequest>;
  // What an ack names: (is_usage, request_id).
  using AckKey = std::pair<bool, std::string>;
  using Stream = grpc::ClientReaderWriter<v1::RecordRequest, v1::RecordAck>;

  struct Queued {
    uint64_t sequence;  // Enqueue order.
    Record record;
  };

  bool Enqueue(Record record);
  // The background thread: opens a stream whenever records are waiting,
  // waits a backoff after each stream breaks.
  void Run();
  // Sends on one stream until it breaks or the reporter stops; then puts the
  // unacknowledged records back to be sent again.
  void RunStream(v1::CacheWatch::Stub& stub);
  // Waits until a record may be sent (true) or the stream must end (false).
  bool WaitToSend(std::unique_lock<std::mutex>& lock);
  void HandleAck(const v1::RecordAck& ack);
  // The lowest sequence number not yet acknowledged or rejected.
  uint64_t OldestOutstanding() const;
  // A jittered wait of the current backoff, which it then doubles.
  std::chrono::milliseconds NextBackoff();

  const ReporterOptions options_;
  const std::shared_ptr<grpc::Channel> channel_;

  mutable std::mutex mutex_;
  // Wakes the background thread (records, acks, stream end, stop).
  std::condition_variable work_changed_;
  // Wakes Flush (a record acknowledged or rejected).
  std::condition_variable progress_;
  bool stopping_ = false;  // Guarded by mutex_.
  // The open stream's context, to cancel it on stop. Guarded by mutex_.
  grpc::ClientContext* context_ = nullptr;
  bool reading_acks_ = false;   // Guarded by mutex_.
  uint64_t next_sequence_ = 0;  // Guarded by mutex_.
  // Never sent, in enqueue order. Guarded by mutex_.
  std::deque<Queued> queue_;
  // To send again before the queue, by sequence. Guarded by mutex_.
  std::map<uint64_t, Record> resend_;
  // Sent on the open stream, by sequence. Guarded by mutex_.
  std::map<uint64_t, Record> unacked_;
  // The sequences in unacked_ by what their ack names, oldest first.
  // Guarded by mutex_.
  absl::flat_hash_map<AckKey, std::deque<uint64_t>> unacked_by_key_;
  // Sending waits until then after a retryable ack. Guarded by mutex_.
  std::chrono::steady_clock::time_point resume_at_;
  std::chrono::milliseconds backoff_;  // Guarded by mutex_.
  std::minstd_rand random_;            // Guarded by mutex_.
  ReporterStats stats_;                // Guarded by mutex_.
  mutable bool failing_ = false;       // Guarded by mutex_.

  std::thread thread_;  // Last: starts once the rest is initialized.
};

}  // namespace cachewatch::client

#endif  // CACHEWATCH_CLIENT_REPORTER_H_
