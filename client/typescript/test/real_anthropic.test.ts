// instrumentAnthropic around the real @anthropic-ai/sdk client, talking to a
// loopback server that answers like the Messages API (support/provider_server.ts),
// reporting to a real cachewatchd (env CACHEWATCHD): every way an SDK user
// calls messages.create and reads its result, with the break (or none) that
// ends up in the daemon's database.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { instrumentAnthropic, Reporter } from '../src/index.js';
import * as daemon from './support/daemon.js';
import { anthropicUsage, PREFIX_TOKENS } from './support/provider_server.js';
import {
  Call, collect, expectSnapshotOnly, instrumented, readText, runCalls, Sdk, toolOrderTests,
} from './support/sdk_runs.js';

/* eslint-disable @typescript-eslint/no-explicit-any */
const d = daemon.useDaemon('anthropic-sdk');
const AGENT = 'ts-anthropic-sdk';

const SDK: Sdk<Anthropic> = {
  daemon: d, agent: AGENT,
  client: (url) => new Anthropic({ apiKey: 'test', baseURL: url, maxRetries: 0 }),
  instrument: (c, reporter, opts) => instrumentAnthropic(c, reporter, opts),
};

const TOOLS = ['shell', 'read_file', 'mcp__github__search'].map((name) => ({
  name, description: `the ${name} tool`, input_schema: { type: 'object', properties: { arg: { type: 'string' } } },
}));

const params = (session: string, tools: any[]): any => ({
  model: 'claude-sonnet-4-6', max_tokens: 100, system: `You are the agent of session ${session}.`, tools,
  cache_control: { type: 'ephemeral' }, messages: [{ role: 'user', content: 'hi' }],
});

const stream = (c: Anthropic, p: any) =>
  c.messages.create({ ...p, stream: true } as Anthropic.MessageCreateParamsStreaming);

const CALLS: Record<string, Call<Anthropic>> = {
  'messages.create': async (c, p) => {
    const message = await c.messages.create(p);
    return { message, request_id: message._request_id };
  },
  'messages.create().withResponse()': async (c, p) => {
    const { data, response, request_id } = await c.messages.create(p).withResponse();
    return { data, request_id, status: response.status };
  },
  'messages.parse()': async (c, p) => c.messages.parse(p),
  'stream: true, for await': async (c, p) => collect(await stream(c, p)),
  'stream: true, .withResponse() then for await': async (c, p) => {
    const { data, request_id } = await stream(c, p).withResponse();
    return { events: await collect(data), request_id };
  },
  'stream: true, tee()': async (c, p) => {
    const [left, right] = (await stream(c, p)).tee();
    return { left: await collect(left), right: await collect(right) };
  },
  'stream: true, toReadableStream()': async (c, p) => readText((await stream(c, p)).toReadableStream()),
  'messages.stream()': async (c, p) => {
    const s = c.messages.stream(p);
    const texts: string[] = [];
    s.on('text', (t) => texts.push(t));
    const events = await collect(s);
    return { events, texts, final: await s.finalMessage() };
  },
};

toolOrderTests<Anthropic>({
  ...SDK, name: 'anthropic', sessionPrefix: 'an', params, tools: TOOLS, toolName: (t) => t.name, calls: CALLS,
});

test('anthropic: the usage reported is the Message usage, or message_start\'s merged with message_delta\'s', async () => {
  const reporter = new Reporter({ address: d.address });
  let n = 0;
  const session = 'an-usage';
  await runCalls(instrumented(SDK, reporter, { sessionId: session, requestId: () => `u${n++}` }),
    async (c, p) => (p.stream ? collect(await stream(c, p)) : c.messages.create(p)),
    [params(session, TOOLS), { ...params(session, TOOLS), stream: true }]);
  await daemon.drain(reporter, 4);
  assert.deepEqual(await daemon.turns(d.db, session, 2), [`u0|1|0|12`, `u1|1|${PREFIX_TOKENS}|12`]);
  const raw = daemon.sql(d.db, `SELECT raw_usage_json FROM turns WHERE session_id = '${session}' ORDER BY request_id`)
    .map((r) => JSON.parse(r));
  assert.deepEqual(raw, [anthropicUsage(false), anthropicUsage(true)]);
  assert.deepEqual(daemon.sql(d.db, `SELECT DISTINCT provider FROM turns WHERE session_id = '${session}'`),
    ['anthropic']);
});

test('anthropic: .asResponse() gives the caller the unread body; the snapshot is reported, no usage', async () => {
  const session = 'an-as-response';
  const call: Call<Anthropic> = async (c, p) => {
    const response = await c.messages.create(p).asResponse();
    return { status: response.status, body: await response.json() };
  };
  await expectSnapshotOnly(SDK, session, 'r0', call, params(session, TOOLS));
});

test('anthropic: a deferred tool is still sent; the snapshot lists only the prefix tools', async () => {
  const session = 'an-deferred';
  const deferred = { ...TOOLS[0], name: 'web_fetch', defer_loading: true };
  const search = { type: 'tool_search_tool_regex_20251119', name: 'tool_search_tool_regex' };
  const reporter = new Reporter({ address: d.address });
  const got = await runCalls(instrumented(SDK, reporter, { sessionId: session, requestId: () => 'd0' }),
    async (c, p) => c.messages.create(p), [params(session, [deferred, ...TOOLS, search])]);
  assert.deepEqual(JSON.parse(got.bodies[0]).tools.map((t: any) => t.name),
    ['mcp__github__search', 'read_file', 'shell', 'tool_search_tool_regex', 'web_fetch']);
  await daemon.drain(reporter, 2);
  assert.deepEqual(daemon.sql(d.db, `SELECT tool_count FROM turns WHERE session_id = '${session}'`), ['4']);
});
