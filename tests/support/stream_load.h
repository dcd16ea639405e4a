// Test support: several Record streams to a daemon, each sending the turns
// of its own lane (TurnSnapshot then TurnUsage, turn after turn, as fast as
// flow control lets it) until the daemon ends the stream or goes away, or
// the test stops it. Every record sent and every record acknowledged OK is
// kept, by key: "s/<request id>" for a snapshot, "u/<request id>" for a
// usage.
//
// Thread-safe; each stream runs on threads of its own.
#ifndef CACHEWATCH_TESTS_SUPPORT_STREAM_LOAD_H_
#define CACHEWATCH_TESTS_SUPPORT_STREAM_LOAD_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace cachewatch::testing {

class StreamLoad {
 public:
  // Stream c sends the lane (agent, "<session_prefix>-<c>") from turn
  // `first_turn` on.
  StreamLoad(const std::string& address, const std::string& agent,
             const std::string& session_prefix, int streams,
             int first_turn = 0);
  ~StreamLoad();

  // Half-closes the streams that are still open and waits for all to end.
  void Stop();
  // Waits for every stream to end by itself.
  void Join();

  std::set<std::string> sent();
  std::set<std::string> acked();
  size_t acked_count();
  // The final status of each stream; valid after Join() or Stop().
  std::vector<grpc::Status> statuses();

 private:
  struct Stream;
  void Run(Stream& stream, const std::string& agent, const std::string& session,
           int first_turn);

  std::atomic<bool> stopping_{false};
  std::vector<std::unique_ptr<Stream>> streams_;
  std::mutex mutex_;
  std::set<std::string> sent_;   // Guarded by mutex_.
  std::set<std::string> acked_;  // Guarded by mutex_.
};

// Every record stored in the database at `db_path`, keyed as above.
std::set<std::string> StoredRecordKeys(const std::string& db_path);

}  // namespace cachewatch::testing

#endif  // CACHEWATCH_TESTS_SUPPORT_STREAM_LOAD_H_
