// instrumentOpenAI: wraps an `openai` SDK client's chat.completions.create and
// responses.create (and so the SDK helpers that call them: .stream(),
// .parse(), runTools()) so that each request reports a snapshot before and a
// usage after (instrument.ts). Duck-typed: no dependency on the SDK. The
// caller gets the SDK's own result (APIPromise, response, Stream) and the
// wrapper never fails the request.
//
// Usage: the response's `usage`, verbatim. Streaming: chat completions report
// the usage of the last chunk that carries `usage` (the request needs
// stream_options.include_usage); the Responses API reports response.completed's
// (or .incomplete / .failed) response.usage. A Responses response's
// prompt_cache_diagnostics go with the usage.
import { canonicalJson } from './canonical_json.js';
import { instrumentContext, instrumentCreate, Instrumented, InstrumentOptions, RequestShape } from './instrument.js';
import { Reporter } from './reporter.js';
import { diagnosticsOf } from './stream_tap.js';

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

function optionsOf(params: Json): Json {
  const options: Json = {};
  for (const k of OPTION_KEYS) if (params[k] !== undefined) options[k] = params[k];
  return options;
}

/** OpenAI caches prompt prefixes automatically; prompt_cache_retention '24h' extends the TTL. */
function cacheControlOf(params: Json): Json {
  return { enabled: true, automatic: true, ttl_seconds: params.prompt_cache_retention === '24h' ? 86400 : 0 };
}

const CHAT: RequestShape = {
  toolName,
  describe(params) {
    const { system, blocks } = chatParts(params.messages);
    return { systemPrompt: system, messageBlocks: blocks, options: optionsOf(params), cacheControl: cacheControlOf(params) };
  },
  observe(event, seen) {
    if (event?.usage) { seen.usage = event.usage; seen.model = event.model; }
    return false;
  },
};

const RESPONSES: RequestShape = {
  toolName,
  describe(params) {
    const system = params.instructions === undefined || params.instructions === null ? '' : textOf(params.instructions);
    return {
      systemPrompt: system, messageBlocks: responsesBlocks(params.input), options: optionsOf(params),
      cacheControl: cacheControlOf(params),
    };
  },
  observe(event, seen) {
    if (FINAL_RESPONSE_EVENTS.has(event?.type) && event.response?.usage) {
      seen.usage = event.response.usage;
      seen.model = event.response.model;
      const diagnostics = diagnosticsOf(event.response);
      if (diagnostics) seen.diagnostics = diagnostics;
      return true;
    }
    return false;
  },
};

export function instrumentOpenAI<C extends object>(
  client: C, reporter: Reporter, opts: InstrumentOptions): C & { cachewatch: Instrumented } {
  const ctx = instrumentContext(reporter, opts, 'PROVIDER_OPENAI');
  const c = client as Json;
  instrumentCreate(c.chat?.completions, ctx, CHAT);
  instrumentCreate(c.responses, ctx, RESPONSES);
  return Object.assign(client, { cachewatch: ctx.state });
}
