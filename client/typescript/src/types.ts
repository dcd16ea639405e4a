// Plain-object shapes of the cachewatch.v1 messages as proto-loader reads and
// writes them with LOADER_OPTIONS (snake_case, enum names, fixed64 as decimal
// strings). Only what the client builds is typed.

export interface Timestamp { seconds: number | string; nanos: number }

export type Provider =
  | 'PROVIDER_UNSPECIFIED' | 'PROVIDER_ANTHROPIC' | 'PROVIDER_BEDROCK' | 'PROVIDER_OPENAI'
  | 'PROVIDER_GEMINI' | 'PROVIDER_DASHSCOPE' | 'PROVIDER_DEEPSEEK' | 'PROVIDER_KIMI';

export type ExpectedDrop =
  | 'EXPECTED_DROP_UNSPECIFIED' | 'EXPECTED_DROP_COMPACTION' | 'EXPECTED_DROP_CACHE_EDIT'
  | 'EXPECTED_DROP_RESUMED' | 'EXPECTED_DROP_ABORTED_PREVIOUS';

export type ToolOrderPolicy =
  | 'TOOL_ORDER_POLICY_UNSPECIFIED' | 'TOOL_ORDER_POLICY_REGISTRATION'
  | 'TOOL_ORDER_POLICY_LEXICOGRAPHIC' | 'TOOL_ORDER_POLICY_EXPLICIT';

export interface ToolRef { name: string; schema_hash: string }
export interface SystemSection { name: string; hash: string }
export interface Breakpoint {
  segment: 'PROMPT_SEGMENT_UNSPECIFIED' | 'PROMPT_SEGMENT_TOOLS' | 'PROMPT_SEGMENT_SYSTEM' | 'PROMPT_SEGMENT_MESSAGES';
  index: number;
  ttl_seconds?: number;
  /** Blocks of the segment after the marked one; 0: on the segment's last block. */
  blocks_after?: number;
}
export interface CacheControl {
  enabled: boolean;
  automatic?: boolean;
  ttl_seconds?: number;
  breakpoints?: Breakpoint[];
}

export interface Snapshot {
  agent: string;
  session_id: string;
  lane?: string;
  request_id: string;
  request_time: Timestamp;
  provider: Provider;
  model: string;
  system_hash: string;
  system_sections?: SystemSection[];
  tools?: ToolRef[];
  cache_control?: CacheControl;
  options_hash?: string;
  message_chain?: string[];
  expected_drop?: ExpectedDrop;
  tool_order_policy?: ToolOrderPolicy;
}

export interface NormalizedUsage {
  uncached_input_tokens?: number | string;
  cache_read_tokens?: number | string;
  cache_write_tokens?: number | string;
  cache_write_5m_tokens?: number | string;
  cache_write_1h_tokens?: number | string;
  output_tokens?: number | string;
}

export interface Usage {
  agent: string;
  session_id: string;
  lane?: string;
  request_id: string;
  response_time: Timestamp;
  provider: Provider;
  model?: string;
  normalized?: NormalizedUsage;
  raw_usage_json?: string;
  provider_diagnostics?: { cache_miss_reason: string; cache_missed_input_tokens?: number | string };
}

/** A Date (default: now) as a google.protobuf.Timestamp. */
export function toTimestamp(date: Date = new Date()): Timestamp {
  const ms = date.getTime();
  const seconds = Math.floor(ms / 1000);
  return { seconds, nanos: (ms - seconds * 1000) * 1e6 };
}
