// instrumentAnthropic: wraps an @anthropic-ai/sdk client's messages.create so
// that each non-streaming request reports a snapshot before and a usage after.
// Duck-typed: no dependency on the SDK. The wrapper never fails the agent's
// request: a snapshot it cannot build is skipped (counted in `skipped`).
// Streaming requests (stream: true) report the usage when the stream ends:
// message_start's message.usage merged with message_delta's final usage.
import { randomUUID } from 'node:crypto';
import { canonicalJson } from './canonical_json.js';
import { Reporter } from './reporter.js';
import { SnapshotBuilder } from './snapshot_builder.js';
import { reportUsageOf, UsageSeen } from './stream_tap.js';
import { Tool, ToolOrder } from './tool_order.js';
import { Provider, toTimestamp } from './types.js';

export interface InstrumentOptions {
  agent: string;
  sessionId: string;
  lane?: string;
  toolOrder?: ToolOrder;
  /** Reorder params.tools by the policy before sending (default true). */
  applyToolOrder?: boolean;
  /** Default PROVIDER_ANTHROPIC (the Messages API, also on Vertex and Bedrock InvokeModel). */
  provider?: Provider;
  /** Default: a random UUID per request. */
  requestId?: () => string;
}

/* eslint-disable @typescript-eslint/no-explicit-any */
type Json = any;

const OPTION_KEYS = ['tool_choice', 'thinking', 'betas', 'metadata', 'output_config', 'container', 'mcp_servers'];

function messageBlocks(messages: Json[]): Json[] {
  const out: Json[] = [];
  for (const m of messages ?? []) {
    if (typeof m.content === 'string') out.push({ role: m.role, type: 'text', text: m.content });
    else for (const b of m.content ?? []) out.push({ ...b, role: m.role });
  }
  return out;
}

export interface Instrumented { skipped: number; builder: SnapshotBuilder }

export function instrumentAnthropic<C extends { messages: { create: (...a: any[]) => any } }>(
  client: C, reporter: Reporter, opts: InstrumentOptions): C & { cachewatch: Instrumented } {
  const builder = new SnapshotBuilder({
    agent: opts.agent, sessionId: opts.sessionId, lane: opts.lane, toolOrder: opts.toolOrder,
  });
  const state: Instrumented = { skipped: 0, builder };
  const provider = opts.provider ?? 'PROVIDER_ANTHROPIC';
  const original = client.messages.create.bind(client.messages);
  client.messages.create = (params: Json, ...rest: any[]) => {
    let sendParams = params;
    let requestId = '';
    try {
      requestId = opts.requestId ? opts.requestId() : randomUUID();
      const tools: Tool[] = (params.tools ?? []).map((t: Json) => ({
        name: t.name, definition: t, shouldDefer: !!t.defer_loading,
      }));
      if (opts.applyToolOrder !== false && tools.length) {
        sendParams = { ...params, tools: builder.orderTools(tools).map((t) => t.definition) };
      }
      const options: Json = {};
      for (const k of OPTION_KEYS) if (params[k] !== undefined) options[k] = params[k];
      const system = params.system === undefined ? ''
        : typeof params.system === 'string' ? params.system : canonicalJson(params.system);
      const text = JSON.stringify(params);
      reporter.reportSnapshot(builder.build({
        requestId, provider, model: params.model, systemPrompt: system, tools,
        messageBlocks: messageBlocks(params.messages), options,
        cacheControl: {
          enabled: text.includes('"cache_control"'),
          automatic: params.cache_control !== undefined,
          ttl_seconds: params.cache_control?.ttl === '1h' ? 3600 : 0,
        },
      }));
    } catch {
      state.skipped++;
      requestId = '';
    }
    const result = original(sendParams, ...rest);
    const report = (usage: Json, model: unknown) => {
      reporter.reportUsage({
        agent: opts.agent, session_id: opts.sessionId, lane: opts.lane ?? '', request_id: requestId,
        response_time: toTimestamp(), provider, model: typeof model === 'string' && model ? model : params.model,
        raw_usage_json: JSON.stringify(usage),
      });
    };
    if (requestId) {
      reportUsageOf(result, Boolean(params?.stream), report, (event: Json, seen: UsageSeen) => {
        if (event?.type === 'message_start' && event.message?.usage) {
          seen.usage = { ...event.message.usage };
          seen.model = event.message.model;
        } else if (event?.type === 'message_delta' && event.usage && seen.usage) {
          for (const [k, v] of Object.entries(event.usage)) if (v !== null && v !== undefined) seen.usage[k] = v;
        }
        return event?.type === 'message_stop';
      });
    }
    return result;
  };
  return Object.assign(client, { cachewatch: state });
}
