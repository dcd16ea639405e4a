// Test support: the records an end-to-end test's simulated client sends for
// turn n of a lane (agent, session): a snapshot and a usage with request id
// "<session>-<n>", both stamped on the client clock n seconds after a start
// five minutes before the test process began (recent enough for the daemon
// to accept them and to reload their lanes after a restart).
//
// Plain functions of their arguments; thread-safe.
#ifndef CACHEWATCH_TESTS_SUPPORT_TURN_RECORDS_H_
#define CACHEWATCH_TESTS_SUPPORT_TURN_RECORDS_H_

#include <string>

#include "cachewatch/v1/snapshot.pb.h"
#include "cachewatch/v1/usage.pb.h"

namespace cachewatch::testing {

// The snapshot of turn `turn`: an Anthropic claude-sonnet-4-5 request with
// system hash 1 and the tools Bash, Read and Write (schema hashes 'B', 'R',
// 'W'); the same every turn.
v1::Snapshot TurnSnapshot(const std::string& agent, const std::string& session,
                          int turn);

// The usage answering TurnSnapshot(agent, session, turn), 500 us after its
// request: normalized counts only, 20,000 tokens written on turn 0 (a cold
// start) and 20,000 read with 100 written on every later turn (a hit).
v1::Usage TurnUsage(const std::string& agent, const std::string& session,
                    int turn);

}  // namespace cachewatch::testing

#endif  // CACHEWATCH_TESTS_SUPPORT_TURN_RECORDS_H_
