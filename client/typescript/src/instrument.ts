// What the SDK wrappers (anthropic.ts, openai.ts) share: replacing one SDK
// `create` method by an instrumented one. Each call
//   1. reports a snapshot of the request (the API-specific parts come from a
//      RequestShape) and orders params.tools by the policy — reordering only:
//      every tool is sent, deferred ones too (they stay out of the snapshot,
//      which describes the cached prefix). With applyToolOrder: false the tools
//      go out as given and the snapshot lists them in that order, with
//      TOOL_ORDER_POLICY_REGISTRATION;
//   2. calls the SDK's own create and returns its result object itself (the
//      SDK's APIPromise with withResponse(), asResponse() and its helpers);
//   3. reports the usage once, when the caller has the response parsed or has
//      read the stream (stream_tap.ts).
// Never throws into the agent and never fails its request: a snapshot that
// cannot be built is skipped (counted in `skipped`, no usage report for that
// call); the tools are still sent in the policy's order when that worked.
import { randomUUID } from 'node:crypto';
import { Reporter } from './reporter.js';
import { ModelRequest, SnapshotBuilder } from './snapshot_builder.js';
import { reportUsageOf, UsageSeen } from './stream_tap.js';
import { Tool, ToolOrder } from './tool_order.js';
import { Breakpoint, Provider, Snapshot, toTimestamp } from './types.js';

/* eslint-disable @typescript-eslint/no-explicit-any */
type Json = any;

export interface InstrumentOptions {
  agent: string;
  sessionId: string;
  lane?: string;
  toolOrder?: ToolOrder;
  /**
   * Reorder params.tools by the policy before sending (default true). With
   * false, the tools are sent as given and reported in that order.
   */
  applyToolOrder?: boolean;
  /** Default: PROVIDER_ANTHROPIC for instrumentAnthropic, PROVIDER_OPENAI for instrumentOpenAI. */
  provider?: Provider;
  /** Default: a random UUID per request. */
  requestId?: () => string;
}

/** What an instrumented client carries as `cachewatch`. */
export interface Instrumented { skipped: number; builder: SnapshotBuilder }

/** One instrumented client: its options, reporter and snapshot builder (shared by its APIs). */
export interface InstrumentContext {
  reporter: Reporter;
  opts: InstrumentOptions;
  provider: Provider;
  state: Instrumented;
}

export function instrumentContext(reporter: Reporter, opts: InstrumentOptions, provider: Provider): InstrumentContext {
  const builder = new SnapshotBuilder({
    agent: opts.agent, sessionId: opts.sessionId, lane: opts.lane, toolOrder: opts.toolOrder,
  });
  return { reporter, opts, provider: opts.provider ?? provider, state: { skipped: 0, builder } };
}

/** How one API's request and response look. */
export interface RequestShape {
  toolName(tool: Json): string;
  /** The snapshot fields besides model and tools: system prompt, message blocks, options, cache control. */
  describe(params: Json): Pick<ModelRequest, 'systemPrompt' | 'messageBlocks' | 'options' | 'cacheControl'>;
  /** Gathers a stream event's usage into `seen`; true on the final event. */
  observe(event: Json, seen: UsageSeen): boolean;
  /** The cache_control a tool definition carries (a breakpoint on that tool), if the API has them. */
  toolCacheControl?(tool: Json): Json;
  /**
   * The tool definition as the cache sees it (e.g. without its cache_control
   * marker, which is reported as a breakpoint instead); default: as sent.
   */
  cachedDefinition?(tool: Json): Json;
}

/** A tool of the request: what the snapshot hashes, and the definition as sent. */
interface RequestTool extends Tool { sent: Json }

/** A breakpoint's TTL in seconds from its cache_control ({"ttl": "1h"}); 0: the default. */
export function breakpointTtl(cacheControl: Json): number {
  return cacheControl?.ttl === '1h' ? 3600 : 0;
}

/**
 * Adds the tools' breakpoints, placed in the snapshot's tool list as sent, in
 * front of the other segments' (prompt order: tools, system, messages).
 */
function addToolBreakpoints(shape: RequestShape, snapshot: Snapshot, tools: Tool[]): void {
  if (!shape.toolCacheControl) return;
  const marks = new Map<string, Json>();
  for (const t of tools) {
    const mark = t.shouldDefer ? undefined : shape.toolCacheControl((t as RequestTool).sent);
    if (mark) marks.set(t.name, mark);
  }
  if (!marks.size) return;
  const refs = snapshot.tools ?? [];
  const breakpoints: Breakpoint[] = [];
  refs.forEach((ref, index) => {
    if (!marks.has(ref.name)) return;
    breakpoints.push({
      segment: 'PROMPT_SEGMENT_TOOLS', index, blocks_after: refs.length - 1 - index,
      ttl_seconds: breakpointTtl(marks.get(ref.name)),
    });
  });
  const control = snapshot.cache_control ?? { enabled: true };
  snapshot.cache_control = { ...control, enabled: true, breakpoints: [...breakpoints, ...(control.breakpoints ?? [])] };
}

/** The snapshot's tools in the order `tools` has them (the builder lists them in its policy's order). */
function asRegistered(ctx: InstrumentContext, snapshot: Snapshot, tools: Tool[]): void {
  const inPolicyOrder = ctx.state.builder.orderTools(tools);
  const position = new Map(inPolicyOrder.map((t, i) => [t, i]));
  const refs = snapshot.tools ?? [];
  snapshot.tools = tools.filter((t) => position.has(t)).map((t) => refs[position.get(t)!]);
  snapshot.tool_order_policy = 'TOOL_ORDER_POLICY_REGISTRATION';
}

function toolsOf(shape: RequestShape, params: Json): RequestTool[] {
  return (params.tools ?? []).map((t: Json) => ({
    name: shape.toolName(t), definition: shape.cachedDefinition ? shape.cachedDefinition(t) : t,
    shouldDefer: !!t?.defer_loading, sent: t,
  }));
}

/** The params to send: params.tools ordered by the policy (all of them), unless applyToolOrder is false. */
function orderedParams(ctx: InstrumentContext, params: Json, tools: RequestTool[]): Json {
  if (ctx.opts.applyToolOrder === false || !tools.length) return params;
  const ordered = ctx.state.builder.orderTools(tools, { includeDeferred: true });
  return { ...params, tools: ordered.map((t) => t.sent) };
}

/** Builds and reports the snapshot; throws when it cannot be built. */
function reportSnapshot(ctx: InstrumentContext, shape: RequestShape, params: Json, tools: Tool[], requestId: string): void {
  const snapshot = ctx.state.builder.build({
    requestId, provider: ctx.provider, model: params.model, tools, ...shape.describe(params),
  });
  if (ctx.opts.applyToolOrder === false) asRegistered(ctx, snapshot, tools);
  addToolBreakpoints(shape, snapshot, tools);
  ctx.reporter.reportSnapshot(snapshot);
}

/** Replaces `owner.create` (when it is a function) by the instrumented call. */
export function instrumentCreate(owner: Json, ctx: InstrumentContext, shape: RequestShape): void {
  if (!owner || typeof owner.create !== 'function') return;
  const original = owner.create.bind(owner);
  owner.create = (params: Json, ...rest: any[]) => {
    let sendParams = params;
    let requestId = '';
    try {
      requestId = ctx.opts.requestId ? ctx.opts.requestId() : randomUUID();
      const tools = toolsOf(shape, params);
      sendParams = orderedParams(ctx, params, tools);
      reportSnapshot(ctx, shape, params, tools, requestId);
    } catch {
      ctx.state.skipped++;
      requestId = '';
    }
    const result = original(sendParams, ...rest);
    if (requestId) {
      // With the provider's diagnostics, the usage goes as the response
      // around it ({"usage": ..., "diagnostics": ...}), which the daemon reads.
      const report = (usage: Json, model: unknown, diagnostics?: Record<string, Json>) => {
        ctx.reporter.reportUsage({
          agent: ctx.opts.agent, session_id: ctx.opts.sessionId, lane: ctx.opts.lane ?? '', request_id: requestId,
          response_time: toTimestamp(), provider: ctx.provider,
          model: typeof model === 'string' && model ? model : params.model,
          raw_usage_json: JSON.stringify(diagnostics ? { usage, ...diagnostics } : usage),
        });
      };
      reportUsageOf(result, Boolean(params?.stream), report, shape.observe);
    }
    return result;
  };
}
