#include "cachewatch/client/breakpoints.h"

namespace cachewatch::client {

void SetBlocksAfter(v1::Snapshot& snapshot, size_t message_blocks) {
  for (v1::Breakpoint& breakpoint :
       *snapshot.mutable_cache_control()->mutable_breakpoints()) {
    if (breakpoint.has_blocks_after()) continue;
    size_t length = 0;
    switch (breakpoint.segment()) {
      case v1::PROMPT_SEGMENT_TOOLS:
        length = snapshot.tools_size();
        break;
      case v1::PROMPT_SEGMENT_SYSTEM:
        length = snapshot.system_sections_size();
        break;
      case v1::PROMPT_SEGMENT_MESSAGES:
        length = message_blocks;
        break;
      default:
        break;
    }
    if (breakpoint.index() < length) {
      breakpoint.set_blocks_after(length - 1 - breakpoint.index());
    }
  }
}

}  // namespace cachewatch::client
