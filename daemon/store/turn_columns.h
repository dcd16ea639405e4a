// The columns a turns row is inserted with, in the order both stores give
// them (daemon/store/sqlite/write_statements.h kUpsertTurn,
// daemon/store/postgres/pg_write_statements.h kPgCopyTurns): one list, so
// that the two stores cannot insert different columns. A string literal, for
// concatenation into the statements' text.
#ifndef CACHEWATCH_DAEMON_STORE_TURN_COLUMNS_H_
#define CACHEWATCH_DAEMON_STORE_TURN_COLUMNS_H_

#define CACHEWATCH_TURN_INSERT_COLUMNS                                       \
  "agent, session_id, lane, request_id, provider, model, request_time_us,\n" \
  "  snapshot_received, system_hash, system_sections, tool_list_hash, "      \
  "tool_count,\n"                                                            \
  "  options_hash, cache_enabled, cache_automatic, cache_ttl_seconds, "      \
  "breakpoints,\n"                                                           \
  "  message_chain, expected_drop, tool_order_policy, response_time_us,\n"   \
  "  usage_received, uncached_input_tokens, cache_read_tokens,\n"            \
  "  cache_write_tokens, cache_write_5m_tokens, cache_write_1h_tokens,\n"    \
  "  output_tokens, prompt_total_tokens, raw_usage_json, "                   \
  "provider_miss_reason,\n"                                                  \
  "  provider_missed_tokens, verdict, primary_reason, break_id,\n"           \
  "  expected_reuse_tokens, missed_tokens, received_at_us"

#endif  // CACHEWATCH_DAEMON_STORE_TURN_COLUMNS_H_
