#include "cachewatch/client/reporter.h"

#include <algorithm>
#include <limits>
#include <new>

namespace cachewatch::client {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

ReporterOptions Normalized(ReporterOptions options) {
  options.initial_backoff = std::max(options.initial_backoff, milliseconds(1));
  options.max_backoff = std::max(options.max_backoff, options.initial_backoff);
  options.max_unacked_records =
      std::max<size_t>(options.max_unacked_records, 1);
  if (options.credentials == nullptr) {
    options.credentials = grpc::InsecureChannelCredentials();
  }
  return options;
}

std::shared_ptr<grpc::Channel> NewChannel(const ReporterOptions& options) {
  // The channel reconnects by itself, with exponential backoff and jitter;
  // ours replaces its defaults (up to two minutes), so that a daemon that
  // comes back is seen within max_backoff.
  const auto clamp = [](milliseconds delay) {
    return static_cast<int>(
        std::min<int64_t>(delay.count(), std::numeric_limits<int>::max()));
  };
  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
                   clamp(options.initial_backoff));
  arguments.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
                   clamp(options.max_backoff));
  return grpc::CreateCustomChannel(options.address, options.credentials,
                                   arguments);
}

// Acks the daemon gives when its store is full or down: worth a later retry.
bool Retryable(int32_t code) {
  return code == grpc::StatusCode::RESOURCE_EXHAUSTED ||
         code == grpc::StatusCode::UNAVAILABLE;
}

}  // namespace

Reporter::Reporter(ReporterOptions options)
    : options_(Normalized(std::move(options))),
      channel_(NewChannel(options_)),
      backoff_(options_.initial_backoff),
      random_(std::random_device{}()),
      thread_([this] { Run(); }) {}

Reporter::~Reporter() {
  Flush(options_.flush_timeout);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    if (context_ != nullptr) context_->TryCancel();
  }
  work_changed_.notify_one();
  thread_.join();
}

bool Reporter::ReportSnapshot(v1::Snapshot snapshot) {
  try {
    auto record = std::make_shared<v1::RecordRequest>();
    *record->mutable_snapshot() = std::move(snapshot);
    return Enqueue(std::move(record));
  } catch (const std::bad_alloc&) {
    return Enqueue(nullptr);
  }
}

bool Reporter::ReportUsage(v1::Usage usage) {
  try {
    auto record = std::make_shared<v1::RecordRequest>();
    *record->mutable_usage() = std::move(usage);
    return Enqueue(std::move(record));
  } catch (const std::bad_alloc&) {
    return Enqueue(nullptr);
  }
}

// A null record (its copy could not be allocated) counts as a drop.
bool Reporter::Enqueue(Record record) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (record == nullptr || queue_.size() >= options_.max_queued_records) {
      ++stats_.dropped;
      return false;
    }
    try {
      queue_.push_back(Queued{next_sequence_, std::move(record)});
    } catch (const std::bad_alloc&) {
      ++stats_.dropped;
      return false;
    }
    ++next_sequence_;
    ++stats_.enqueued;
  }
  work_changed_.notify_one();
  return true;
}

bool Reporter::Flush(milliseconds timeout) {
  const steady_clock::time_point deadline = steady_clock::now() + timeout;
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t target = next_sequence_;
  return progress_.wait_until(lock, deadline,
                              [&] { return OldestOutstanding() >= target; });
}

ReporterStats Reporter::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

bool Reporter::Healthy() const {
  std::lock_guard<std::mutex> lock(mutex_);
  const bool idle = queue_.empty() && resend_.empty() && unacked_.empty();
  if (!failing_) {
    // A stream waiting for the channel (wait_for_ready) does not break:
    // records outstanding on a channel that failed to connect count too.
    if (idle || channel_->GetState(/*try_to_connect=*/false) !=
                    GRPC_CHANNEL_TRANSIENT_FAILURE) {
      return true;
    }
    failing_ = true;
    return false;
  }
  // Idle, a READY channel means the daemon is back: the next records go to
  // it and keep it healthy while they wait for their acks.
  if (idle &&
      channel_->GetState(/*try_to_connect=*/true) == GRPC_CHANNEL_READY) {
    failing_ = false;
  }
  return !failing_;
}

void Reporter::Run() {
  std::unique_ptr<v1::CacheWatch::Stub> stub =
      v1::CacheWatch::NewStub(channel_);
  bool first = true;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_changed_.wait(
        lock, [&] { return stopping_ || !queue_.empty() || !resend_.empty(); });
    if (stopping_) return;
    if (!first) ++stats_.reconnects;
    first = false;
    lock.unlock();
    RunStream(*stub);
    lock.lock();
    work_changed_.wait_for(lock, NextBackoff(), [&] { return stopping_; });
  }
}

void Reporter::RunStream(v1::CacheWatch::Stub& stub) {
  grpc::ClientContext context;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    context_ = &context;  // Canceling before the call starts is allowed.
    reading_acks_ = true;
  }
  // Waits, until canceled, for the channel to (re)connect.
  context.set_wait_for_ready(true);
  std::unique_ptr<Stream> stream = stub.Record(&context);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.connected = channel_->GetState(false) == GRPC_CHANNEL_READY;
  }
  std::thread reader([&] {
    v1::RecordAck ack;
    while (stream->Read(&ack)) HandleAck(ack);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      reading_acks_ = false;
    }
    work_changed_.notify_one();
  });

  for (;;) {
    Record record;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (!WaitToSend(lock)) break;
      uint64_t sequence;
      const bool resend = !resend_.empty();
      if (resend) {
        auto oldest = resend_.begin();
        sequence = oldest->first;
        record = oldest->second;
        resend_.erase(oldest);
      } else {
        sequence = queue_.front().sequence;
        record = std::move(queue_.front().record);
        queue_.pop_front();
      }
      unacked_.emplace(sequence, record);
      unacked_by_key_[record->has_usage()
                          ? AckKey(true, record->usage().request_id())
                          : AckKey(false, record->snapshot().request_id())]
          .push_back(sequence);
      // Counted before the write: its ack may be handled, and Flush() return,
      // before Write() does.
      ++stats_.sent;
      if (resend) ++stats_.retried;
    }
    if (!stream->Write(*record)) break;
  }

  // The stream only ends broken or on stop: cancel it to end the reader too.
  context.TryCancel();
  reader.join();
  stream->Finish();
  std::lock_guard<std::mutex> lock(mutex_);
  context_ = nullptr;
  stats_.connected = false;
  // Only stopping ends a stream on purpose: any other end is the daemon
  // going away or the connection breaking, outstanding records or not.
  if (!stopping_) failing_ = true;
  resend_.merge(unacked_);
  unacked_by_key_.clear();
}

bool Reporter::WaitToSend(std::unique_lock<std::mutex>& lock) {
  for (;;) {
    if (stopping_ || !reading_acks_) return false;
    const bool waiting = !resend_.empty() || !queue_.empty();
    if (!waiting || unacked_.size() >= options_.max_unacked_records) {
      work_changed_.wait(lock);
    } else if (steady_clock::now() < resume_at_) {
      work_changed_.wait_until(lock, resume_at_);
    } else {
      return true;
    }
  }
}

void Reporter::HandleAck(const v1::RecordAck& ack) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto keyed = unacked_by_key_.find(AckKey(ack.is_usage(), ack.request_id()));
    if (keyed == unacked_by_key_.end()) return;  // Not a record we sent.
    const uint64_t sequence = keyed->second.front();
    keyed->second.pop_front();
    if (keyed->second.empty()) unacked_by_key_.erase(keyed);
    auto node = unacked_.extract(sequence);
    if (ack.code() == grpc::StatusCode::OK) {
      failing_ = false;
      ++stats_.acked;
      backoff_ = options_.initial_backoff;
    } else if (Retryable(ack.code())) {
      failing_ = true;
      resend_.insert(std::move(node));
      const steady_clock::time_point now = steady_clock::now();
      if (now >= resume_at_) resume_at_ = now + NextBackoff();
    } else {
      ++stats_.rejected;
    }
  }
  work_changed_.notify_one();
  progress_.notify_all();
}

uint64_t Reporter::OldestOutstanding() const {
  uint64_t oldest = std::numeric_limits<uint64_t>::max();
  if (!queue_.empty()) oldest = queue_.front().sequence;
  if (!resend_.empty()) oldest = std::min(oldest, resend_.begin()->first);
  if (!unacked_.empty()) oldest = std::min(oldest, unacked_.begin()->first);
  return oldest;
}

milliseconds Reporter::NextBackoff() {
  const int64_t current = backoff_.count();
  backoff_ = std::min(backoff_ * 2, options_.max_backoff);
  return milliseconds(
      std::uniform_int_distribution<int64_t>(current / 2, current)(random_));
}

}  // namespace cachewatch::client
