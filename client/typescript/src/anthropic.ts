// instrumentAnthropic: wraps an @anthropic-ai/sdk client's messages.create
// (and so messages.stream() and messages.parse(), which call it) so that each
// request reports a snapshot before and a usage after (instrument.ts).
// Duck-typed: no dependency on the SDK. The caller gets the SDK's own result
// (APIPromise, Message, Stream) and the wrapper never fails the request.
// Usage: the Message's `usage`; for stream: true, message_start's
// message.usage merged with message_delta's, reported at message_stop (or when
// the stream ends). The response's cache `diagnostics` (on message_start when
// streaming) go with it. Breakpoints: every cache_control marker on a tool,
// system block or message content block, placed relative to its segment; the
// markers themselves are left out of what is hashed (they are not cached
// content, and the one on the last message moves every turn).
import { canonicalJson } from './canonical_json.js';
import {
  breakpointTtl, instrumentContext, instrumentCreate, Instrumented, InstrumentOptions, RequestShape,
} from './instrument.js';
import { Reporter } from './reporter.js';
import { diagnosticsOf } from './stream_tap.js';
import { Breakpoint } from './types.js';

export type { Instrumented, InstrumentOptions } from './instrument.js';

/* eslint-disable @typescript-eslint/no-explicit-any */
type Json = any;

const OPTION_KEYS = ['tool_choice', 'thinking', 'betas', 'metadata', 'output_config', 'container', 'mcp_servers'];

/**
 * `block` without its cache_control marker: the marker is not part of the
 * cached content (it moves every turn on the last message block), and it is
 * reported as a breakpoint instead.
 */
function withoutMarker(block: Json): Json {
  if (!block || typeof block !== 'object' || !('cache_control' in block)) return block;
  const { cache_control: _marker, ...rest } = block;
  void _marker;
  return rest;
}

/** The content blocks of the messages, in order, each with its role, as sent (markers included). */
function sentBlocks(messages: Json[]): Json[] {
  const out: Json[] = [];
  for (const m of messages ?? []) {
    if (typeof m.content === 'string') out.push({ role: m.role, type: 'text', text: m.content });
    else for (const b of m.content ?? []) out.push({ ...b, role: m.role });
  }
  return out;
}

/** The breakpoints (cache_control markers) of a segment's blocks, placed in it. */
function segmentBreakpoints(segment: Breakpoint['segment'], blocks: Json[]): Breakpoint[] {
  const out: Breakpoint[] = [];
  blocks.forEach((b, index) => {
    if (b?.cache_control) {
      out.push({ segment, index, blocks_after: blocks.length - 1 - index, ttl_seconds: breakpointTtl(b.cache_control) });
    }
  });
  return out;
}

const MESSAGES: RequestShape = {
  toolName: (t) => t.name,
  toolCacheControl: (t) => t?.cache_control,
  cachedDefinition: withoutMarker,
  describe(params) {
    const options: Json = {};
    for (const k of OPTION_KEYS) if (params[k] !== undefined) options[k] = params[k];
    const system = params.system === undefined ? ''
      : typeof params.system === 'string' ? params.system : canonicalJson(params.system.map(withoutMarker));
    const text = JSON.stringify(params);
    const blocks = sentBlocks(params.messages);
    return {
      systemPrompt: system, messageBlocks: blocks.map(withoutMarker), options,
      cacheControl: {
        enabled: text.includes('"cache_control"'),
        automatic: params.cache_control !== undefined,
        ttl_seconds: params.cache_control?.ttl === '1h' ? 3600 : 0,
        breakpoints: [
          ...segmentBreakpoints('PROMPT_SEGMENT_SYSTEM', Array.isArray(params.system) ? params.system : []),
          ...segmentBreakpoints('PROMPT_SEGMENT_MESSAGES', blocks),
        ],
      },
    };
  },
  observe(event, seen) {
    if (event?.type === 'message_start' && event.message?.usage) {
      seen.usage = { ...event.message.usage };
      seen.model = event.message.model;
      // Cache diagnostics arrive on message_start only.
      const diagnostics = diagnosticsOf(event.message);
      if (diagnostics) seen.diagnostics = diagnostics;
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
