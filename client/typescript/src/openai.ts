// instrumentOpenAI: wraps an `openai` SDK client's chat.completions.create and
// responses.create so that each request reports a snapshot before and a usage
// after (streaming too). Duck-typed: no dependency on the SDK. The wrapper
// never changes what the caller gets and never fails the agent's request: a
// snapshot it cannot build is skipped (counted in `skipped`).
//
// Streaming: chat completions report the usage of the last chunk that carries
// `usage` (the request needs stream_options.include_usage); the Responses API
// reports response.completed's (or .incomplete / .failed) response.usage.
import { randomUUID } from 'node:crypto';
import { canonicalJson } from './canonical_json.js';
import { InstrumentOptions, Instrumented } from './anthropic.js';
import { Reporter } from './reporter.js';
import { SnapshotBuilder } from './snapshot_builder.js';
import { reportUsageOf, UsageSeen } from './stream_tap.js';
import { Tool } from './tool_order.js';
import { toTimestamp } from './types.js';

/* eslint-disable @typescript-eslint/no-explicit-any */
type Json = any;

const OPTION_KEYS = [
  'tool_choice', 'parallel_tool_calls', 'response_format', 'text', 'reasoning', 'reasoning_effort',
  'prompt_cache_key', 'prompt_cache_retention', 'include',
];

const FINAL_RESPONSE_EVENTS = new Set(['response.completed', 'response.incomplete', 'response.failed']);

function textOf(content: Json): string {
  return typeof content === 'string' ? content : canonicalJson(JSON.stringify(content ?? null));
}

function pushContent(out: Json[], role: string, content: Json, extra: Json = {}): void {
  if (content === null || content === undefined) return;
  if (typeof content === 'string') out.push({ ...extra, role, type: 'text', text: content });
  else if (Array.isArray(content)) for (const p of content) out.push({ ...p, ...extra, role });
  else out.push({ ...extra, role, type: 'content', content });
}

function isSystem(m: Json): boolean {
  return m && (m.role === 'system' || m.role === 'developer') && (m.type === undefined || m.type === 'message');
}

/** Chat Completions: the system/developer messages and the blocks of the others. */
function chatParts(messages: Json[]): { system: string; blocks: Json[] } {
  const sys: Json[] = [];
  const blocks: Json[] = [];
  for (const m of messages ?? []) {
    if (isSystem(m)) { sys.push(m); continue; }
    const extra: Json = {};
    if (m.tool_call_id !== undefined) extra.tool_call_id = m.tool_call_id;
    if (m.name !== undefined) extra.name = m.name;
    pushContent(blocks, m.role, m.content, extra);
    for (const tc of m.tool_calls ?? []) blocks.push({ ...tc, role: m.role, type: 'tool_call', call_type: tc.type });
    if (m.function_call) blocks.push({ ...m.function_call, role: m.role, type: 'function_call' });
  }
  const system = sys.every((m) => typeof m.content === 'string')
    ? sys.map((m) => m.content).join('\n\n')
    : canonicalJson(JSON.stringify(sys.map((m) => ({ role: m.role, content: m.content }))));
  return { system, blocks };
}

/** Responses API: `input` (a string or a list of items) as blocks. */
function responsesBlocks(input: Json): Json[] {
  if (input === undefined || input === null) return [];
  if (typeof input === 'string') return [{ role: 'user', type: 'text', text: input }];
  const blocks: Json[] = [];
  for (const item of input) {
    if (item && item.role !== undefined && (item.type === undefined || item.type === 'message')) {
      pushContent(blocks, item.role, item.content);
    } else {
      blocks.push(item);
    }
  }
  return blocks;
}

function toolName(t: Json): string {
  return t?.function?.name ?? t?.name ?? t?.server_label ?? t?.type ?? '';
}

export function instrumentOpenAI<C extends object>(
  client: C, reporter: Reporter, opts: InstrumentOptions): C & { cachewatch: Instrumented } {
  const builder = new SnapshotBuilder({
    agent: opts.agent, sessionId: opts.sessionId, lane: opts.lane, toolOrder: opts.toolOrder,
  });
  const state: Instrumented = { skipped: 0, builder };
  const provider = opts.provider ?? 'PROVIDER_OPENAI';
  const c = client as Json;

  const wrap = (owner: Json, api: 'chat' | 'responses') => {
    if (!owner || typeof owner.create !== 'function') return;
    const original = owner.create.bind(owner);
    owner.create = (params: Json, ...rest: any[]) => {
      let sendParams = params;
      let requestId = '';
      try {
        requestId = opts.requestId ? opts.requestId() : randomUUID();
        const tools: Tool[] = (params.tools ?? []).map((t: Json) => ({
          name: toolName(t), definition: t, shouldDefer: !!t.defer_loading,
        }));
        if (opts.applyToolOrder !== false && tools.length) {
          sendParams = { ...params, tools: builder.orderTools(tools).map((t) => t.definition) };
        }
        const options: Json = {};
        for (const k of OPTION_KEYS) if (params[k] !== undefined) options[k] = params[k];
        let system = '';
        let blocks: Json[] = [];
        if (api === 'chat') {
          ({ system, blocks } = chatParts(params.messages));
        } else {
          system = params.instructions === undefined || params.instructions === null ? '' : textOf(params.instructions);
          blocks = responsesBlocks(params.input);
        }
        const retention = params.prompt_cache_retention;
        reporter.reportSnapshot(builder.build({
          requestId, provider, model: params.model, systemPrompt: system, tools,
          messageBlocks: blocks, options,
          cacheControl: { enabled: true, automatic: true, ttl_seconds: retention === '24h' ? 86400 : 0 },
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
          if (api === 'chat') {
            if (event?.usage) { seen.usage = event.usage; seen.model = event.model; }
            return false;
          }
          if (FINAL_RESPONSE_EVENTS.has(event?.type) && event.response?.usage) {
            seen.usage = event.response.usage;
            seen.model = event.response.model;
            return true;
          }
          return false;
        });
      }
      return result;
    };
  };
  wrap(c.chat?.completions, 'chat');
  wrap(c.responses, 'responses');
  return Object.assign(client, { cachewatch: state });
}
