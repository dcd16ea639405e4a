// The proxy is invisible to the agent: the real @anthropic-ai/sdk and openai
// clients, pointed at cachewatchd --proxy-listen with their baseURL, get the
// loopback upstream's bytes unchanged (JSON, SSE streams, HTTP errors), and
// the upstream gets the SDK's request bytes unchanged; a cut stream reaches
// the SDK as an error, a malformed body is still forwarded and answered, and
// an unreachable upstream is a 502 in the provider's error shape, counted.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Agent, createServer, request as httpRequest } from 'node:http';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { freePort } from '../support/daemon.js';
import { ProviderServer, startProviderServer } from '../support/provider_server.js';
import { metric, ProxyDaemon, startProxyDaemon, waitForMetric } from './support.js';

/* eslint-disable @typescript-eslint/no-explicit-any */
let upstream: ProviderServer;
let d: ProxyDaemon;

before(async () => {
  upstream = await startProviderServer();
  d = await startProxyDaemon([`--proxy-upstream=anthropic=${upstream.url}`, `--proxy-upstream=openai=${upstream.url}`]);
});
after(async () => {
  d?.stop();
  await upstream?.close();
});

const anthropic = (url: string) => new Anthropic({ apiKey: 'sk-ant-secret', baseURL: url, maxRetries: 0 });
const openai = (url: string) => new OpenAI({ apiKey: 'sk-secret', baseURL: `${url}/v1`, maxRetries: 0 });

const TOOLS = ['shell', 'read_file'].map((name) => ({
  name, description: `the ${name} tool`, input_schema: { type: 'object' as const, properties: {} },
}));
const messages = (extra: any = {}): any => ({
  model: 'claude-sonnet-4-6', max_tokens: 100, system: 'You are a test agent.', tools: TOOLS,
  messages: [{ role: 'user', content: 'hi' }], ...extra,
});
const chat = (extra: any = {}): any => ({
  model: 'gpt-4.1', messages: [{ role: 'system', content: 'You are a test agent.' }, { role: 'user', content: 'hi' }],
  ...extra,
});

/** Headers as the upstream saw them, without those a proxy must set itself. */
function endToEnd(headers: Record<string, unknown>): Record<string, unknown> {
  const { host: _host, connection: _connection, ...rest } = headers;
  return rest;
}

/**
 * Runs `call` once against the upstream directly and once through the proxy: the upstream receives identical
 * request bytes and end-to-end headers (the API key included); returns the last exchange seen by the upstream.
 */
async function direct_and_proxied(call: (url: string) => Promise<string>): Promise<void> {
  await call(upstream.url);
  const direct = upstream.requests.at(-1)!;
  const got = await call(d.proxy);
  const proxied = upstream.requests.at(-1)!;
  assert.equal(proxied.body, direct.body);
  assert.deepEqual(endToEnd(proxied.headers), endToEnd(direct.headers));
  assert.equal(got, proxied.response, 'the SDK got other bytes than the upstream sent');
}

test('Anthropic messages.create, JSON: bytes unchanged both ways', async () => {
  await direct_and_proxied(async (url) => (await anthropic(url).messages.create(messages()).asResponse()).text());
  assert.equal(upstream.requests.at(-1)!.headers.authorization, 'Bearer sk-ant-secret', 'the API key passes through');
});

test('Anthropic messages.create, stream: the SDK gets the upstream event stream byte for byte', async () => {
  await direct_and_proxied(async (url) =>
    (await anthropic(url).messages.create(messages({ stream: true })).asResponse()).text());
  const events: string[] = [];
  for await (const e of (await anthropic(d.proxy).messages.create(messages({ stream: true }))) as any) {
    events.push(e.type);
  }
  assert.deepEqual(events, ['message_start', 'content_block_start', 'content_block_delta',
    'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop']);
});

test('Anthropic beta messages (?beta=true): path and query forwarded', async () => {
  await anthropic(d.proxy).beta.messages.create(messages());
  assert.equal(upstream.requests.at(-1)!.path, '/v1/messages');
  const text = await (await anthropic(d.proxy).beta.messages.create(messages()).asResponse()).text();
  assert.equal(text, upstream.requests.at(-1)!.response);
});

test('OpenAI chat.completions, JSON and stream with include_usage: bytes unchanged both ways', async () => {
  await direct_and_proxied(async (url) => (await openai(url).chat.completions.create(chat()).asResponse()).text());
  await direct_and_proxied(async (url) => (await openai(url).chat.completions
    .create(chat({ stream: true, stream_options: { include_usage: true } })).asResponse()).text());
  let usage: any = null;
  const chunks: any = await openai(d.proxy).chat.completions.create(
    chat({ stream: true, stream_options: { include_usage: true } }));
  for await (const chunk of chunks) {
    usage = chunk.usage ?? usage;
  }
  assert.ok(usage.prompt_tokens_details.cached_tokens > 0);
});

test('OpenAI responses, stream: bytes unchanged both ways', async () => {
  await direct_and_proxied(async (url) => (await openai(url).responses
    .create({ model: 'gpt-5', instructions: 'Be brief.', input: 'hi', stream: true }).asResponse()).text());
  const done = await openai(d.proxy).responses.stream({ model: 'gpt-5', instructions: 'Be brief.', input: 'hi' })
    .finalResponse();
  assert.equal(done.output_text, 'hello');
});

test('an HTTP error of the upstream reaches the SDK unchanged', async () => {
  const headers = { 'x-provider-test': 'status=429' };
  await assert.rejects(anthropic(d.proxy).messages.create(messages(), { headers }), (err: unknown) => {
    const e = err as any;
    assert.ok(err instanceof Anthropic.RateLimitError);
    assert.deepEqual(e.error, JSON.parse(upstream.requests.at(-1)!.response));
    return true;
  });
  await assert.rejects(openai(d.proxy).chat.completions.create(chat(), { headers }), (err: unknown) => {
    const e = err as any;
    assert.ok(err instanceof OpenAI.RateLimitError);
    assert.equal(e.code, 'rate_limit_exceeded');
    return true;
  });
});

test('a stream the upstream drops mid-way fails in the SDK, counted as upstream_dropped', async () => {
  const before = await metric(d, 'cachewatch_proxy_requests_total', 'outcome="upstream_dropped"');
  const stream: any = await anthropic(d.proxy).messages.create(messages({ stream: true }),
    { headers: { 'x-provider-test': 'drop-after=3' } });
  const seen: string[] = [];
  await assert.rejects(async () => {
    for await (const e of stream) seen.push(e.type);
  });
  assert.deepEqual(seen, ['message_start', 'content_block_start']);  // The SDK drops the ping.
  assert.equal(await waitForMetric(d, 'cachewatch_proxy_requests_total', 'outcome="upstream_dropped"', before + 1),
    before + 1);
});

test('a malformed body is forwarded as it is and the upstream answer returned', async () => {
  const body = '{"model": "claude-sonnet-4-6", "messages": [';
  const res = await fetch(`${d.proxy}/v1/messages`, {
    method: 'POST', body, headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
  });
  const last = upstream.requests.at(-1)!;
  assert.equal(last.body, body);
  assert.equal(res.status, 404);
  assert.equal(await res.text(), last.response);
});

test('HTTP/1.1 keep-alive towards the agent: two requests on one connection', async () => {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const url = new URL(d.proxy);
  const get = () => new Promise<{ reused: boolean; status: number }>((resolve, reject) => {
    const req = httpRequest({ host: url.hostname, port: url.port, path: '/v1/models', agent }, (res) => {
      res.resume();
      res.on('end', () => resolve({ reused: req.reusedSocket, status: res.statusCode! }));
    });
    req.on('error', reject);
    req.end();
  });
  const first = await get();
  const second = await get();
  agent.destroy();
  assert.deepEqual([first.reused, second.reused], [false, true]);
  assert.equal(second.status, 404);
});

test('an unreachable upstream is a 502 in the provider\'s error shape, counted', async () => {
  const port = await freePort();
  const down = await startProxyDaemon([`--proxy-upstream=anthropic=http://127.0.0.1:${port}`,
    `--proxy-upstream=openai=http://127.0.0.1:${port}/v1beta`]);
  try {
    await assert.rejects(anthropic(down.proxy).messages.create(messages()), (err: unknown) => {
      const e = err as any;
      assert.ok(err instanceof Anthropic.InternalServerError, String(err));
      assert.equal(e.status, 502);
      assert.equal(e.error.type, 'error');
      assert.equal(e.error.error.type, 'api_error');
      assert.match(e.error.error.message, /unreachable/);
      return true;
    });
    await assert.rejects(openai(down.proxy).chat.completions.create(chat()), (err: unknown) => {
      const e = err as any;
      assert.ok(err instanceof OpenAI.InternalServerError);
      assert.equal(e.status, 502);
      assert.equal(e.type, 'server_error');
      assert.match(e.message, /unreachable/);
      return true;
    });
    assert.equal(await metric(down, 'cachewatch_proxy_requests_total', 'outcome="upstream_unreachable"'), 2);
  } finally {
    down.stop();
  }
});

test('an interim 103 from the upstream is dropped; the agent gets the final response', async () => {
  const raw = createServer((req, res) => {
    req.resume();
    res.writeEarlyHints({ link: '</style.css>; rel=preload' });
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"ok":true}');
  });
  await new Promise<void>((r) => raw.listen(0, '127.0.0.1', r));
  const own = await startProxyDaemon([`--proxy-upstream=openai=http://127.0.0.1:${(raw.address() as any).port}`]);
  try {
    for (let i = 0; i < 2; i++) {  // The second on the kept upstream connection.
      const res = await fetch(`${own.proxy}/v1/chat/completions`, { method: 'POST', body: '{}' });
      assert.equal(res.status, 200);
      assert.equal(await res.text(), '{"ok":true}');
    }
  } finally {
    own.stop();
    raw.closeAllConnections();
    raw.close();
  }
});
