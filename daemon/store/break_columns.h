// The columns a prompt_cache_breaks row is written with, in the order both
// stores' insert statements bind them (daemon/store/sqlite/write_statements.h
// kInsertBreak, daemon/store/postgres/pg_write_statements.h kPgInsertBreak):
// one list, so that the two stores cannot write different columns. A string
// literal, for concatenation into the statements' text.
#ifndef CACHEWATCH_DAEMON_STORE_BREAK_COLUMNS_H_
#define CACHEWATCH_DAEMON_STORE_BREAK_COLUMNS_H_

#define CACHEWATCH_BREAK_COLUMNS                                              \
  "break_id, agent, session_id, lane, provider, previous_request_id,\n"       \
  "  request_id, previous_model, model, primary_reason, reasons, evidence,\n" \
  "  previous_cache_read_tokens, current_cache_read_tokens,\n"                \
  "  expected_reuse_tokens, missed_tokens, prompt_total_tokens,\n"            \
  "  cache_write_tokens, changed_tool_names, added_tool_names,\n"             \
  "  removed_tool_names, reordered_tool_names, schema_changed_tool_names,\n"  \
  "  changed_system_sections, first_changed_tool_index,\n"                    \
  "  first_changed_message_block, blocks_since_last_write, gap_seconds,\n"    \
  "  ttl_seconds, ttl_source, estimated_extra_cost_usd,\n"                    \
  "  previous_request_time_us, request_time_us, provider_miss_reason,\n"      \
  "  provider_missed_tokens, provider_agreement, event"

#endif  // CACHEWATCH_DAEMON_STORE_BREAK_COLUMNS_H_
