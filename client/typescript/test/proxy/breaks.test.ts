// Zero-code capture: the real SDKs talk to the loopback provider through
// cachewatchd --proxy-listen, uninstrumented, and the daemon stores the breaks
// the proxy observed — the tool that moved, a schema edit, a date in the
// system prompt, a model switch, a TTL gap — with lanes from the
// x-cachewatch-* headers or, with no header at all, inferred from the
// message chain. A malformed body is counted, never observed; with
// --proxy-request-diagnostics the provider is asked for its own verdict.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import * as daemon from '../support/daemon.js';
import { ProviderServer, startProviderServer } from '../support/provider_server.js';
import { history, ProxyDaemon, startProxyDaemon, tool, waitForMetric } from './support.js';

/* eslint-disable @typescript-eslint/no-explicit-any */
let upstream: ProviderServer;
let d: ProxyDaemon;

before(async () => {
  upstream = await startProviderServer();
  d = await startProxyDaemon([`--proxy-upstream=anthropic=${upstream.url}`, `--proxy-upstream=openai=${upstream.url}`,
    '--ttl=openai=1']);
});
after(async () => {
  d?.stop();
  await upstream?.close();
});

const TOOLS = ['shell', 'read_file', 'mcp__github__search', 'mcp__slack__post'].map((n) => tool(n));

/** An Anthropic client reporting as `session` (no headers at all when null). */
function client(session: string | null): Anthropic {
  const defaultHeaders = session === null ? {} : { 'x-cachewatch-agent': 'proxy-test', 'x-cachewatch-session': session };
  return new Anthropic({ apiKey: 'sk-ant-secret', baseURL: d.proxy, maxRetries: 0, defaultHeaders });
}

const params = (first: string, n: number, extra: any = {}): any => ({
  model: 'claude-sonnet-4-6', max_tokens: 100, system: 'You are the test agent.', tools: TOOLS,
  messages: history(first, n), ...extra,
});

/** The stored breaks of the session as "primary_reason|column" (one column of prompt_cache_breaks). */
async function stored(session: string, column: string, n: number): Promise<string[]> {
  await daemon.waitForBreaks(d.db, session, n);
  return daemon.sql(d.db, `SELECT primary_reason, ${column} FROM prompt_cache_breaks WHERE session_id = '${session}'
    ORDER BY request_id`);
}

test('tools registered in racy order: tools_order_changed naming the moved tools', async () => {
  const c = client('racy-tools');
  await c.messages.create(params('racy', 1));
  // An MCP server that connected faster this time: its tool comes first.
  const moved = [TOOLS[3], TOOLS[0], TOOLS[1], TOOLS[2]];
  await c.messages.create(params('racy', 2, { tools: moved }));
  assert.deepEqual(await stored('racy-tools', 'reordered_tool_names', 1),
    ['tools_order_changed|["mcp__slack__post"]']);
});

test('a schema edit: tools_schema_changed naming the tool', async () => {
  const c = client('schema-edit');
  await c.messages.create(params('schema', 1));
  const edited = TOOLS.map((t) => (t.name === 'read_file' ? tool('read_file', { path: { type: 'string' } }) : t));
  await c.messages.create(params('schema', 2, { tools: edited }));
  assert.deepEqual(await stored('schema-edit', 'schema_changed_tool_names', 1),
    ['tools_schema_changed|["read_file"]']);
});

test('a date in the system prompt: system_changed', async () => {
  const c = client('dated-system');
  await c.messages.create(params('dated', 1, { system: 'You are the test agent. Today is 2026-12-01.' }));
  await c.messages.create(params('dated', 2, { system: 'You are the test agent. Today is 2026-12-02.' }));
  assert.deepEqual(await stored('dated-system', "''", 1), ['system_changed|']);
});

test('a model switch, streamed: model_changed', async () => {
  const c = client('model-switch');
  for await (const _ of (await c.messages.create(params('switch', 1, { stream: true }))) as any) { /* drain */ }
  for await (const _ of (await c.messages.create(params('switch', 2, { stream: true, model: 'claude-opus-4-6' }))) as any) {
    /* drain */
  }
  assert.deepEqual(await stored('model-switch', 'previous_model || \'>\' || model', 1),
    ['model_changed|claude-sonnet-4-6>claude-opus-4-6']);
});

test('a TTL gap (OpenAI chat, --ttl openai=1): ttl_expired', async () => {
  const c = new OpenAI({ apiKey: 'sk-secret', baseURL: `${d.proxy}/v1`, maxRetries: 0,
    defaultHeaders: { 'x-cachewatch-agent': 'proxy-test', 'x-cachewatch-session': 'ttl-gap' } });
  const body = (n: number): any => ({
    model: 'gpt-4.1', messages: [{ role: 'system', content: 'You are the test agent.' },
      ...history('ttl', n).map((m) => ({ role: m.role, content: m.content }))],
  });
  await c.chat.completions.create(body(1));
  await new Promise((r) => setTimeout(r, 1500));
  await c.chat.completions.create(body(2), { headers: { 'x-provider-test': 'miss' } });
  assert.deepEqual(await stored('ttl-gap', "''", 1), ['ttl_expired|']);
});

test('no header at all: the lane is inferred from the message chain and the break still names the tools', async () => {
  const c = client(null);
  const first = 'uninstrumented agent, unique opening';
  await c.messages.create(params(first, 1));
  await c.messages.create(params(first, 2, { tools: [TOOLS[1], TOOLS[0], TOOLS[2], TOOLS[3]] }));
  let rows: string[] = [];
  for (let i = 0; i < 50 && rows.length === 0; i++) {
    rows = daemon.sql(d.db, `SELECT agent, primary_reason, reordered_tool_names FROM prompt_cache_breaks
      WHERE agent = 'proxy'`);
    if (rows.length === 0) await new Promise((r) => setTimeout(r, 100));
  }
  assert.deepEqual(rows, ['proxy|tools_order_changed|["read_file"]']);
});

test('a malformed body is forwarded and answered, counted as invalid_body, nothing stored', async () => {
  const before = daemon.sql(d.db, 'SELECT count(*) FROM turns')[0];
  const res = await fetch(`${d.proxy}/v1/messages`, {
    method: 'POST', body: '{"model": ', headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
  });
  assert.equal(res.status, 404);
  assert.equal(await res.text(), upstream.requests.at(-1)!.response);
  assert.equal(await waitForMetric(d, 'cachewatch_proxy_observe_failures_total', 'reason="invalid_body"', 1), 1);
  assert.equal(daemon.sql(d.db, 'SELECT count(*) FROM turns')[0], before);
});

test('--proxy-request-diagnostics asks Anthropic for its verdict against the previous message (its own API only)', async () => {
  const diag = await startProxyDaemon([`--proxy-upstream=anthropic=${upstream.url}`,
    `--proxy-upstream=/compatible=${upstream.url}`, '--proxy-request-diagnostics=true']);
  try {
    const c = new Anthropic({ apiKey: 'sk-ant-secret', baseURL: diag.proxy, maxRetries: 0,
      defaultHeaders: { 'x-cachewatch-session': 'diagnostics' } });
    const first = await c.messages.create(params('diagnostics', 1));
    const sent1 = JSON.parse(upstream.requests.at(-1)!.body);
    // The proxy observes off the request path: the lane knows its previous
    // response once that exchange is observed (and stored), not before.
    for (let i = 0; i < 100; i++) {
      if (daemon.sql(diag.db, "SELECT count(*) FROM turns WHERE session_id = 'diagnostics'")[0] !== '0') break;
      await new Promise((r) => setTimeout(r, 50));
    }
    await c.messages.create(params('diagnostics', 2));
    const sent2 = JSON.parse(upstream.requests.at(-1)!.body);
    assert.deepEqual(sent1.diagnostics, { previous_message_id: null });
    assert.deepEqual(sent2.diagnostics, { previous_message_id: first.id });
    const { diagnostics: _, ...rest } = sent2;
    assert.deepEqual(rest, params('diagnostics', 2), 'only the diagnostics field was added');
    // A compatible API on a /PREFIX route: never rewritten.
    const compatible = new Anthropic({ apiKey: 'sk-ant-secret', baseURL: `${diag.proxy}/compatible`, maxRetries: 0,
      defaultHeaders: { 'x-cachewatch-session': 'diagnostics' } });
    await compatible.messages.create(params('diagnostics', 3));
    assert.deepEqual(JSON.parse(upstream.requests.at(-1)!.body), params('diagnostics', 3));
  } finally {
    diag.stop();
  }
});

test('SIGTERM: the daemon stops cleanly (exit 0) and every exchange the proxy forwarded is stored', async () => {
  const own = await startProxyDaemon([`--proxy-upstream=anthropic=${upstream.url}`]);
  try {
    const c = new Anthropic({ apiKey: 'sk-ant-secret', baseURL: own.proxy, maxRetries: 0,
      defaultHeaders: { 'x-cachewatch-session': 'shutdown' } });
    for (let n = 1; n <= 5; n++) await c.messages.create(params('shutdown', n));
    const exited = new Promise<number | null>((resolve) => own.proc.on('exit', (code) => resolve(code)));
    own.proc.kill('SIGTERM');
    assert.equal(await exited, 0);
    assert.deepEqual(daemon.sql(own.db, `SELECT count(*), sum(usage_received) FROM turns WHERE session_id = 'shutdown'`),
      ['5|5']);
  } finally {
    own.stop();
  }
});
