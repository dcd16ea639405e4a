// instrumentAnthropic: wraps an @anthropic-ai/sdk client's messages.create
// (and so messages.stream() and messages.parse(), which call it) so that each
// request reports a snapshot before and a usage after (instrument.ts).
// Duck-typed: no dependency on the SDK. The caller gets the SDK's own result
// (APIPromise, Message, Stream) and the wrapper never fails the request.
// Usage: the Message's `usage`; for stream: true, message_start's
// message.usage merged with message_delta's, reported at message_stop (or when
// the stream ends).
import { canonicalJson } from './canonical_json.js';
import { instrumentContext, instrumentCreate, Instrumented, InstrumentOptions, RequestShape } from './instrument.js';
import { Reporter } from './reporter.js';

export type { Instrumented, InstrumentOptions } from './instrument.js';

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

const MESSAGES: RequestShape = {
  toolName: (t) => t.name,
  describe(params) {
    const options: Json = {};
    for (const k of OPTION_KEYS) if (params[k] !== undefined) options[k] = params[k];
    const system = params.system === undefined ? ''
      : typeof params.system === 'string' ? params.system : canonicalJson(params.system);
    const text = JSON.stringify(params);
    return {
      systemPrompt: system, messageBlocks: messageBlocks(params.messages), options,
      cacheControl: {
        enabled: text.includes('"cache_control"'),
        automatic: params.cache_control !== undefined,
        ttl_seconds: params.cache_control?.ttl === '1h' ? 3600 : 0,
      },
    };
  },
  observe(event, seen) {
    if (event?.type === 'message_start' && event.message?.usage) {
      seen.usage = { ...event.message.usage };
      seen.model = event.message.model;
    } else if (event?.type === 'message_delta' && event.usage && seen.usage) {
      for (const [k, v] of Object.entries(event.usage)) if (v !== null && v !== undefined) seen.usage[k] = v;
    }
    return event?.type === 'message_stop';
  },
};

export function instrumentAnthropic<C extends { messages: { create: (...a: any[]) => any } }>(
  client: C, reporter: Reporter, opts: InstrumentOptions): C & { cachewatch: Instrumented } {
  const ctx = instrumentContext(reporter, opts, 'PROVIDER_ANTHROPIC');
  instrumentCreate(client.messages, ctx, MESSAGES);
  return Object.assign(client, { cachewatch: ctx.state });
}
