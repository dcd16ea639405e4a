// Breakpoint placement: where in its segment each cache_control breakpoint
// of a snapshot stands, as the number of the segment's blocks after it
// (Breakpoint.blocks_after; 0: on the segment's last block). The
// SnapshotBuilder and the daemon's HTTP proxy place breakpoints with it.
//
// Thread-safe: a pure function of its arguments.

#ifndef CACHEWATCH_CLIENT_BREAKPOINTS_H_
#define CACHEWATCH_CLIENT_BREAKPOINTS_H_

#include <cstddef>

#include "cachewatch/v1/snapshot.pb.h"

namespace cachewatch::client {

// Sets blocks_after on each of `snapshot`'s cache_control breakpoints that
// has none, from the length of its segment: the snapshot's tools, its named
// system sections, or `message_blocks` message blocks. Left unset when the
// index is past the end of its segment (so also for a system breakpoint when
// no sections are named) or the segment is unspecified.
void SetBlocksAfter(v1::Snapshot& snapshot, size_t message_blocks);

}  // namespace cachewatch::client

#endif  // CACHEWATCH_CLIENT_BREAKPOINTS_H_
