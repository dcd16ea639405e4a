// A loopback HTTP server (node:http, 127.0.0.1, port 0) that answers like the
// providers, for driving the real @anthropic-ai/sdk and openai packages:
//   POST /v1/messages           Anthropic Messages: JSON, or SSE when stream: true
//   POST /v1/chat/completions   OpenAI Chat Completions: JSON, or SSE chunks + [DONE]
//                               (a usage chunk when stream_options.include_usage)
//   POST /v1/responses          OpenAI Responses: JSON, or SSE events up to response.completed
// Every answer carries a usage block from a simulated prompt cache: the first
// request with a given prefix (model, tools in their order, system prompt)
// writes it, a later one with the same prefix reads it — so reordering the
// tools is a cache miss, as at the provider. Bodies are deterministic for a
// given sequence of requests to a fresh server (ids count up, fixed times),
// and every request body is recorded verbatim, with its headers and the exact
// response body bytes sent.
// For the proxy tests (test/proxy/): HTTPS with `tls`, and a request header
// `x-provider-test` asks for a provider failure:
//   status=429          a JSON error in the provider's shape with that status
//   drop-after=N        a stream cut off (socket destroyed) after N events
//   pause-after=N       a stream that stops after N events until release()
//   miss                a cache miss whatever the prefix (an eviction)
import { createServer, IncomingMessage, ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';

/* eslint-disable @typescript-eslint/no-explicit-any */
type Json = any;

/** Tokens of the cached prefix, of the messages after it, and of the output. */
export const PREFIX_TOKENS = 20000;
export const MESSAGE_TOKENS = 40;
export const OUTPUT_TOKENS = 12;
/** OpenAI caches in 128-token steps: what a hit reads of the prefix. */
export const OPENAI_CACHED_TOKENS = Math.floor(PREFIX_TOKENS / 128) * 128;

const CREATED = 1767225600;

export interface RecordedRequest {
  path: string;
  /** The body exactly as received. */
  body: string;
  /** Header names lower-cased, as node:http gives them. */
  headers: Record<string, string | string[] | undefined>;
  /** The response body exactly as sent (filled in as it is written). */
  response: string;
}

export interface ProviderServer {
  /** http://127.0.0.1:PORT (https:// with `tls`) */
  url: string;
  requests: RecordedRequest[];
  /** How many streams pause-after=N holds now. */
  paused: number;
  /** Lets every paused stream go on (and later ones not pause). */
  release(): void;
  close(): Promise<void>;
}

function prefixKey(path: string, body: Json): string {
  const system = body.system ?? body.instructions ??
    (body.messages ?? []).filter((m: Json) => m.role === 'system' || m.role === 'developer');
  return JSON.stringify([path, body.model, body.tools ?? [], system]);
}

export function anthropicUsage(hit: boolean): Json {
  const write = hit ? 0 : PREFIX_TOKENS;
  return {
    input_tokens: MESSAGE_TOKENS, cache_creation_input_tokens: write, cache_read_input_tokens: hit ? PREFIX_TOKENS : 0,
    cache_creation: { ephemeral_5m_input_tokens: write, ephemeral_1h_input_tokens: 0 },
    output_tokens: OUTPUT_TOKENS, service_tier: 'standard',
  };
}

export function chatUsage(hit: boolean): Json {
  const prompt = PREFIX_TOKENS + MESSAGE_TOKENS;
  return {
    prompt_tokens: prompt, completion_tokens: OUTPUT_TOKENS, total_tokens: prompt + OUTPUT_TOKENS,
    prompt_tokens_details: { cached_tokens: hit ? OPENAI_CACHED_TOKENS : 0, audio_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0,
      rejected_prediction_tokens: 0 },
  };
}

export function responsesUsage(hit: boolean): Json {
  const input = PREFIX_TOKENS + MESSAGE_TOKENS;
  return {
    input_tokens: input, input_tokens_details: { cached_tokens: hit ? OPENAI_CACHED_TOKENS : 0 },
    output_tokens: OUTPUT_TOKENS, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: input + OUTPUT_TOKENS,
  };
}

/** The SSE events of one answer: [event name or null, data]. */
type Sse = Array<[string | null, Json | string]>;

function anthropic(_body: Json, n: number, hit: boolean): { json: Json; sse: Sse } {
  const usage = anthropicUsage(hit);
  const message = {
    id: `msg_${n}`, type: 'message', role: 'assistant', model: 'claude-sonnet-4-6',
    content: [{ type: 'text', text: 'hello' }], stop_reason: 'end_turn', stop_sequence: null, usage,
  };
  const start = { ...message, content: [], stop_reason: null, usage: { ...usage, output_tokens: 1 } };
  const sse: Sse = [
    ['message_start', { type: 'message_start', message: start }],
    ['content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }],
    ['ping', { type: 'ping' }],
    ['content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'hel' } }],
    ['content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'lo' } }],
    ['content_block_stop', { type: 'content_block_stop', index: 0 }],
    ['message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null },
      usage: { output_tokens: OUTPUT_TOKENS } }],
    ['message_stop', { type: 'message_stop' }],
  ];
  return { json: message, sse };
}

function chat(body: Json, n: number, hit: boolean): { json: Json; sse: Sse } {
  const base = { id: `chatcmpl-${n}`, created: CREATED, model: 'gpt-4.1-2025-04-14', system_fingerprint: 'fp_1' };
  const json = {
    ...base, object: 'chat.completion', service_tier: 'default',
    choices: [{ index: 0, message: { role: 'assistant', content: 'hello', refusal: null, annotations: [] },
      logprobs: null, finish_reason: 'stop' }],
    usage: chatUsage(hit),
  };
  const withUsage = body.stream_options?.include_usage === true;
  const chunk = (choices: Json[], usage: Json = null) =>
    ({ ...base, object: 'chat.completion.chunk', choices, ...(withUsage ? { usage } : {}) });
  const delta = (d: Json, finish: string | null = null) => [{ index: 0, delta: d, logprobs: null, finish_reason: finish }];
  const sse: Sse = [
    [null, chunk(delta({ role: 'assistant', content: '', refusal: null }))],
    [null, chunk(delta({ content: 'hel' }))],
    [null, chunk(delta({ content: 'lo' }))],
    [null, chunk(delta({}, 'stop'))],
  ];
  if (withUsage) sse.push([null, chunk([], chatUsage(hit))]);
  sse.push([null, '[DONE]']);
  return { json, sse };
}

function responses(body: Json, n: number, hit: boolean): { json: Json; sse: Sse } {
  const part = { type: 'output_text', text: 'hello', annotations: [], logprobs: [] };
  const item = { id: `msg_${n}`, type: 'message', status: 'completed', role: 'assistant', content: [part] };
  const response = {
    id: `resp_${n}`, object: 'response', created_at: CREATED, status: 'completed', error: null,
    incomplete_details: null, instructions: body.instructions ?? null, model: 'gpt-5-2025-08-07',
    output: [item], parallel_tool_calls: true, tool_choice: 'auto', tools: body.tools ?? [],
    usage: responsesUsage(hit),
  };
  const inProgress = { ...response, status: 'in_progress', output: [], usage: null };
  const text = { item_id: item.id, output_index: 0, content_index: 0 };
  const events: Json[] = [
    { type: 'response.created', response: inProgress },
    { type: 'response.in_progress', response: inProgress },
    { type: 'response.output_item.added', output_index: 0, item: { ...item, status: 'in_progress', content: [] } },
    { type: 'response.content_part.added', ...text, part: { ...part, text: '' } },
    { type: 'response.output_text.delta', ...text, delta: 'hel', logprobs: [] },
    { type: 'response.output_text.delta', ...text, delta: 'lo', logprobs: [] },
    { type: 'response.output_text.done', ...text, text: 'hello', logprobs: [] },
    { type: 'response.content_part.done', ...text, part },
    { type: 'response.output_item.done', output_index: 0, item },
    { type: 'response.completed', response },
  ];
  const sse: Sse = events.map((e, i) => [e.type, { ...e, sequence_number: i }]);
  return { json: response, sse };
}

const ROUTES: Record<string, { answer: typeof anthropic; idHeader: string }> = {
  '/v1/messages': { answer: anthropic, idHeader: 'request-id' },
  '/v1/chat/completions': { answer: chat, idHeader: 'x-request-id' },
  '/v1/responses': { answer: responses, idHeader: 'x-request-id' },
};

async function writeSse(res: ServerResponse, sse: Sse, dropAfter: number,
  pauseAfter: number, pause: () => Promise<void>): Promise<void> {
  let sent = 0;
  for (const [event, data] of sse) {
    if (sent === pauseAfter) await pause();
    if (sent++ === dropAfter) {
      res.socket?.destroy();
      return;
    }
    const text = typeof data === 'string' ? data : JSON.stringify(data);
    res.write(`${event === null ? '' : `event: ${event}\n`}data: ${text}\n\n`);
    await new Promise((r) => setImmediate(r));  // one event per write, as a real stream arrives
  }
  res.end();
}

/** The provider's error body for `status` on `path`. */
function errorBody(path: string, status: number): string {
  const message = `simulated ${status}`;
  return JSON.stringify(path === '/v1/messages'
    ? { type: 'error', error: { type: 'rate_limit_error', message } }
    : { error: { message, type: 'requests', param: null, code: 'rate_limit_exceeded' } });
}

export interface ProviderServerOptions {
  /** PEM key and certificate: serve HTTPS. */
  tls?: { key: string; cert: string };
}

export async function startProviderServer(options: ProviderServerOptions = {}): Promise<ProviderServer> {
  const requests: RecordedRequest[] = [];
  const cached = new Set<string>();
  let n = 0;
  let released = false;
  let releaseAll: () => void = () => {};
  const gate = new Promise<void>((resolve) => { releaseAll = resolve; });
  const state = { paused: 0 };
  const pause = async () => {
    if (released) return;
    state.paused++;
    await gate;
    state.paused--;
  };
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    const path = (req.url ?? '').split('?')[0];
    const recorded: RecordedRequest = { path, body: text, headers: req.headers, response: '' };
    requests.push(recorded);
    const write = res.write.bind(res);
    const end = res.end.bind(res);
    res.write = ((chunk: string) => { recorded.response += chunk; return write(chunk); }) as typeof res.write;
    res.end = ((chunk?: string) => { if (chunk) recorded.response += chunk; return end(chunk); }) as typeof res.end;
    const behaviour = String(req.headers['x-provider-test'] ?? '');
    const route = ROUTES[path];
    let body: Json;
    try {
      body = JSON.parse(text);
    } catch {
      body = null;
    }
    if (req.method !== 'POST' || !route || !body) {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { type: 'not_found_error', message: `${req.method} ${path}` } }));
      return;
    }
    const status = /^status=(\d+)$/.exec(behaviour);
    if (status) {
      res.writeHead(Number(status[1]), { 'content-type': 'application/json' });
      res.end(errorBody(path, Number(status[1])));
      return;
    }
    n++;
    const key = prefixKey(path, body);
    const hit = cached.has(key) && behaviour !== 'miss';
    cached.add(key);
    const { json, sse } = route.answer(body, n, hit);
    const headers = { [route.idHeader]: `req_${n}` };
    if (body.stream === true) {
      res.writeHead(200, { ...headers, 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      const drop = /^drop-after=(\d+)$/.exec(behaviour);
      const held = /^pause-after=(\d+)$/.exec(behaviour);
      await writeSse(res, sse, drop ? Number(drop[1]) : -1, held ? Number(held[1]) : -1, pause);
    } else {
      res.writeHead(200, { ...headers, 'content-type': 'application/json' });
      res.end(JSON.stringify(json));
    }
  };
  const listener = (req: IncomingMessage, res: ServerResponse) => {
    handle(req, res).catch((e) => { res.destroy(e as Error); });
  };
  const server = options.tls ? createTlsServer(options.tls, listener) : createServer(listener);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    url: `${options.tls ? 'https' : 'http'}://127.0.0.1:${port}`,
    requests,
    get paused() { return state.paused; },
    release: () => { released = true; releaseAll(); },
    close: () => new Promise<void>((resolve) => {
      released = true;
      releaseAll();
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}
