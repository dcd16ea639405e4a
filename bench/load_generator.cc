// load_generator: drives a cachewatch.v1.CacheWatch server (cachewatchd or
// echo_server) with realistic records and reports throughput and ack
// latency.
//
// Each of --threads client threads has its own channel (one shared channel
// caps at ~5k calls/s) and its own lane, and per turn sends the lane's
// snapshot then its usage (records.h):
//   --mode=unary   RecordSnapshot / RecordUsage calls, one at a time.
//   --mode=stream  one Record stream per thread, at most --window records
//                  unacknowledged; an ack is matched to its record by kind
//                  and request id.
// With --rate=R (records/s over all threads) the load is open loop: record k
// of a thread is due at start + k * threads / R and its latency counts from
// then, so a server that falls behind is charged for the queueing too.
// Without it the threads send as fast as the server answers.
//
// Prints one JSON line on stdout: records (acknowledged OK within the
// --duration_s window), errors, records_per_s and the ack latency
// percentiles p50_us, p99_us, p999_us. Exits 1 when it cannot connect.
// --calls_log=PATH (unary mode) also writes one line per acknowledged call:
// thread, record index, when it was due, sent and answered (microseconds
// since the start, whose CLOCK_MONOTONIC time heads the file), to line up a
// latency tail with the server's events.
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bench/records.h"
#include "cachewatch/v1/service.grpc.pb.h"

namespace cachewatch::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  std::string address;
  int threads = 4;
  bool stream = false;
  double duration_s = 5;
  double rate = 0;  // Records/s over all threads; 0: closed loop.
  int window = 100;
  int tools = 50;
  std::string calls_log;  // Unary: one line per acknowledged call.
};

// One acknowledged unary call, for --calls_log.
struct CallTimes {
  int64_t k;
  Clock::time_point due, sent, done;
};

// What one client thread measured.
struct ThreadResult {
  int64_t records = 0;  // Acknowledged OK within the window.
  int64_t errors = 0;
  std::vector<int64_t> latencies_ns;
  std::vector<CallTimes> calls;  // With --calls_log.
  bool connected = true;
};

std::unique_ptr<v1::CacheWatch::Stub> Connect(const std::string& address,
                                              int index) {
  grpc::ChannelArguments args;
  // A channel of its own, not a subchannel shared with the other threads.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt("cachewatch.bench.channel", index);
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(
      address, grpc::InsecureChannelCredentials(), args);
  if (!channel->WaitForConnected(std::chrono::system_clock::now() +
                                 std::chrono::seconds(5))) {
    return nullptr;
  }
  return v1::CacheWatch::NewStub(channel);
}

LaneId LaneFor(int index) {
  static const std::string run =
      std::to_string(getpid()) + "-" +
      std::to_string(Clock::now().time_since_epoch().count());
  return {"bench-agent", "session-" + run + "-" + std::to_string(index)};
}

// When record `k` of a thread is due; now for a closed loop.
Clock::time_point DueTime(const Options& options, Clock::time_point start,
                          int64_t k) {
  if (options.rate <= 0) return Clock::now();
  const double interval_s = options.threads / options.rate;
  return start + std::chrono::duration_cast<Clock::duration>(
                     std::chrono::duration<double>(interval_s * k));
}

void RunUnary(const Options& options, v1::CacheWatch::Stub* stub, int index,
              Clock::time_point start, Clock::time_point deadline,
              ThreadResult* result) {
  const LaneId lane = LaneFor(index);
  v1::RecordSnapshotRequest snapshot_request;
  v1::RecordSnapshotResponse snapshot_response;
  v1::RecordUsageRequest usage_request;
  v1::RecordUsageResponse usage_response;
  int64_t k = 0;
  for (int64_t turn = 0;; ++turn) {
    for (const bool usage : {false, true}) {
      const Clock::time_point due = DueTime(options, start, k++);
      if (due >= deadline) return;
      std::this_thread::sleep_until(due);
      const Clock::time_point sent = Clock::now();
      grpc::ClientContext context;
      grpc::Status status;
      if (usage) {
        *usage_request.mutable_usage() = MakeUsage(lane, turn);
        status = stub->RecordUsage(&context, usage_request, &usage_response);
      } else {
        *snapshot_request.mutable_snapshot() =
            MakeSnapshot(lane, turn, options.tools);
        status = stub->RecordSnapshot(&context, snapshot_request,
                                      &snapshot_response);
      }
      const Clock::time_point done = Clock::now();
      if (done > deadline) return;
      if (!status.ok()) {
        ++result->errors;
        continue;
      }
      ++result->records;
      result->latencies_ns.push_back((done - due).count());
      if (!options.calls_log.empty()) {
        result->calls.push_back({k - 1, due, sent, done});
      }
    }
  }
}

void RunStream(const Options& options, v1::CacheWatch::Stub* stub, int index,
               Clock::time_point start, Clock::time_point deadline,
               ThreadResult* result) {
  const LaneId lane = LaneFor(index);
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<v1::RecordRequest, v1::RecordAck>>
      stream = stub->Record(&context);

  std::mutex mutex;
  std::condition_variable acked;
  // When each unacknowledged record was due, by kind and request id.
  std::unordered_map<std::string, Clock::time_point> outstanding;
  bool reader_done = false;  // The stream ended; guarded by mutex.
  auto key = [](bool is_usage, const std::string& request_id) {
    return (is_usage ? "u" : "s") + request_id;
  };

  std::thread reader([&] {
    v1::RecordAck ack;
    while (stream->Read(&ack)) {
      const Clock::time_point done = Clock::now();
      std::lock_guard<std::mutex> lock(mutex);
      auto it = outstanding.find(key(ack.is_usage(), ack.request_id()));
      if (it == outstanding.end()) continue;
      if (done <= deadline) {
        if (ack.code() == 0) {
          ++result->records;
          result->latencies_ns.push_back((done - it->second).count());
        } else {
          ++result->errors;
        }
      }
      outstanding.erase(it);
      acked.notify_one();
    }
    std::lock_guard<std::mutex> lock(mutex);
    reader_done = true;
    acked.notify_one();
  });

  v1::RecordRequest request;
  int64_t k = 0;
  for (int64_t turn = 0;; ++turn) {
    bool stop = false;
    for (const bool usage : {false, true}) {
      const Clock::time_point due = DueTime(options, start, k++);
      if (due >= deadline) {
        stop = true;
        break;
      }
      std::this_thread::sleep_until(due);
      if (usage) {
        *request.mutable_usage() = MakeUsage(lane, turn);
      } else {
        *request.mutable_snapshot() = MakeSnapshot(lane, turn, options.tools);
      }
      {
        std::unique_lock<std::mutex> lock(mutex);
        acked.wait(lock, [&] {
          return reader_done ||
                 static_cast<int>(outstanding.size()) < options.window;
        });
        if (reader_done) {
          stop = true;
          break;
        }
        outstanding[key(usage, RequestId(turn))] =
            options.rate > 0 ? due : Clock::now();
      }
      if (!stream->Write(request)) {
        stop = true;
        break;
      }
    }
    if (stop) break;
  }
  stream->WritesDone();
  reader.join();
  grpc::Status status = stream->Finish();
  if (!status.ok()) ++result->errors;
}

bool ParseFlag(const char* arg, const char* name, std::string* value) {
  const size_t length = std::strlen(name);
  if (std::strncmp(arg, name, length) != 0 || arg[length] != '=') return false;
  *value = arg + length + 1;
  return true;
}

int Main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string value;
    if (ParseFlag(argv[i], "--address", &value)) {
      options.address = value;
    } else if (ParseFlag(argv[i], "--threads", &value)) {
      options.threads = std::max(1, std::atoi(value.c_str()));
    } else if (ParseFlag(argv[i], "--mode", &value) &&
               (value == "unary" || value == "stream")) {
      options.stream = value == "stream";
    } else if (ParseFlag(argv[i], "--duration_s", &value)) {
      options.duration_s = std::atof(value.c_str());
    } else if (ParseFlag(argv[i], "--rate", &value)) {
      options.rate = std::atof(value.c_str());
    } else if (ParseFlag(argv[i], "--window", &value)) {
      options.window = std::max(1, std::atoi(value.c_str()));
    } else if (ParseFlag(argv[i], "--tools", &value)) {
      options.tools = std::max(0, std::atoi(value.c_str()));
    } else if (ParseFlag(argv[i], "--calls_log", &value)) {
      options.calls_log = value;
    } else {
      options.address.clear();
      break;
    }
  }
  if (options.address.empty()) {
    std::fprintf(stderr,
                 "usage: load_generator --address=HOST:PORT [--threads=4] "
                 "[--mode=unary|stream] [--duration_s=5] [--rate=R] "
                 "[--window=100] [--tools=50] [--calls_log=PATH]\n");
    return 2;
  }

  // Start once every thread has connected: 1 s from now.
  const Clock::time_point start = Clock::now() + std::chrono::seconds(1);
  const Clock::time_point deadline =
      start + std::chrono::duration_cast<Clock::duration>(
                  std::chrono::duration<double>(options.duration_s));
  std::vector<ThreadResult> results(options.threads);
  std::vector<std::thread> threads;
  for (int i = 0; i < options.threads; ++i) {
    threads.emplace_back([&, i] {
      std::unique_ptr<v1::CacheWatch::Stub> stub = Connect(options.address, i);
      if (stub == nullptr) {
        results[i].connected = false;
        return;
      }
      std::this_thread::sleep_until(start);
      if (options.stream) {
        RunStream(options, stub.get(), i, start, deadline, &results[i]);
      } else {
        RunUnary(options, stub.get(), i, start, deadline, &results[i]);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();

  ThreadResult total;
  for (ThreadResult& result : results) {
    if (!result.connected) {
      std::fprintf(stderr, "load_generator: cannot connect to %s\n",
                   options.address.c_str());
      return 1;
    }
    total.records += result.records;
    total.errors += result.errors;
    total.latencies_ns.insert(total.latencies_ns.end(),
                              result.latencies_ns.begin(),
                              result.latencies_ns.end());
  }
  if (!options.calls_log.empty()) {
    FILE* log = std::fopen(options.calls_log.c_str(), "w");
    if (log == nullptr) {
      std::fprintf(stderr, "load_generator: cannot write %s\n",
                   options.calls_log.c_str());
      return 1;
    }
    auto us = [&](Clock::time_point t) {
      return static_cast<long long>(
          std::chrono::duration_cast<std::chrono::microseconds>(t - start)
              .count());
    };
    // The start on CLOCK_MONOTONIC (steady_clock), to line the calls up
    // with the server's events (e.g. perf record -k mono).
    std::fprintf(log, "# start_monotonic_us %lld\n",
                 static_cast<long long>(
                     std::chrono::duration_cast<std::chrono::microseconds>(
                         start.time_since_epoch())
                         .count()));
    std::fprintf(log, "thread k due_us sent_us done_us\n");
    for (int i = 0; i < options.threads; ++i) {
      for (const CallTimes& call : results[i].calls) {
        std::fprintf(log, "%d %lld %lld %lld %lld\n", i,
                     static_cast<long long>(call.k), us(call.due),
                     us(call.sent), us(call.done));
      }
    }
    std::fclose(log);
  }
  std::sort(total.latencies_ns.begin(), total.latencies_ns.end());
  auto percentile_us = [&](double p) {
    if (total.latencies_ns.empty()) return 0.0;
    const size_t i =
        std::min(total.latencies_ns.size() - 1,
                 static_cast<size_t>(p * total.latencies_ns.size()));
    return total.latencies_ns[i] / 1000.0;
  };
  std::printf(
      "{\"mode\":\"%s\",\"threads\":%d,\"rate\":%.0f,\"records\":%lld,"
      "\"errors\":%lld,\"records_per_s\":%.1f,\"p50_us\":%.1f,"
      "\"p99_us\":%.1f,\"p999_us\":%.1f}\n",
      options.stream ? "stream" : "unary", options.threads, options.rate,
      static_cast<long long>(total.records),
      static_cast<long long>(total.errors), total.records / options.duration_s,
      percentile_us(0.50), percentile_us(0.99), percentile_us(0.999));
  return 0;
}

}  // namespace
}  // namespace cachewatch::bench

int main(int argc, char** argv) { return cachewatch::bench::Main(argc, argv); }
