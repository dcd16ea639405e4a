// instrumentOpenAI around the real `openai` client, talking to a loopback
// server that answers like Chat Completions and Responses
// (support/provider_server.ts), reporting to a real cachewatchd (env
// CACHEWATCHD): every way an SDK user calls chat.completions.create and
// responses.create and reads the result, with the break (or none) that ends
// up in the daemon's database.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { instrumentOpenAI, Reporter } from '../src/index.js';
import * as daemon from './support/daemon.js';
import { chatUsage, OPENAI_CACHED_TOKENS, responsesUsage } from './support/provider_server.js';
import {
  Call, collect, expectSnapshotOnly, instrumented, readText, runCalls, Sdk, toolOrderTests,
} from './support/sdk_runs.js';

/* eslint-disable @typescript-eslint/no-explicit-any */
const d = daemon.useDaemon('openai-sdk');
const AGENT = 'ts-openai-sdk';

const SDK: Sdk<OpenAI> = {
  daemon: d, agent: AGENT,
  client: (url) => new OpenAI({ apiKey: 'test', baseURL: `${url}/v1`, maxRetries: 0 }),
  instrument: (c, reporter, opts) => instrumentOpenAI(c, reporter, opts),
};

const NAMES = ['shell', 'read_file', 'mcp__github__search'];
const schema = { type: 'object', properties: { arg: { type: 'string' } }, required: ['arg'], additionalProperties: false };

// ---- Chat Completions

const CHAT_TOOLS = NAMES.map((name) => ({
  type: 'function', function: { name, description: `the ${name} tool`, parameters: schema, strict: true },
}));

const chatParams = (session: string, tools: any[]): any => ({
  model: 'gpt-4.1', tools, prompt_cache_key: session,
  messages: [{ role: 'developer', content: `You are the agent of session ${session}.` }, { role: 'user', content: 'hi' }],
});

const chatStream = (c: OpenAI, p: any) => c.chat.completions.create(
  { ...p, stream: true, stream_options: { include_usage: true } } as OpenAI.ChatCompletionCreateParamsStreaming);

const CHAT_CALLS: Record<string, Call<OpenAI>> = {
  'chat.completions.create': async (c, p) => {
    const completion = await c.chat.completions.create(p);
    return { completion, request_id: completion._request_id };
  },
  'chat.completions.create().withResponse()': async (c, p) => {
    const { data, response, request_id } = await c.chat.completions.create(p).withResponse();
    return { data, request_id, status: response.status };
  },
  'chat.completions.parse()': async (c, p) => c.chat.completions.parse(p),
  'stream: true, for await': async (c, p) => collect(await chatStream(c, p)),
  'stream: true, tee()': async (c, p) => {
    const [left, right] = (await chatStream(c, p)).tee();
    return { left: await collect(left), right: await collect(right) };
  },
  'stream: true, toReadableStream()': async (c, p) => readText((await chatStream(c, p)).toReadableStream()),
  'chat.completions.stream()': async (c, p) => {
    const s = c.chat.completions.stream({ ...p, stream_options: { include_usage: true } });
    const chunks = await collect(s);
    return { chunks, final: await s.finalChatCompletion() };
  },
};

toolOrderTests<OpenAI>({
  ...SDK, name: 'openai chat', sessionPrefix: 'oa-chat',
  params: chatParams, tools: CHAT_TOOLS, toolName: (t) => t.function.name, calls: CHAT_CALLS,
});

// ---- Responses

const RESPONSES_TOOLS = NAMES.map((name) => ({
  type: 'function', name, description: `the ${name} tool`, parameters: schema, strict: true,
}));

const responsesParams = (session: string, tools: any[]): any => ({
  model: 'gpt-5', tools, instructions: `You are the agent of session ${session}.`,
  input: [{ role: 'user', content: 'hi' }], prompt_cache_key: session,
});

const responsesStream = (c: OpenAI, p: any) =>
  c.responses.create({ ...p, stream: true } as OpenAI.Responses.ResponseCreateParamsStreaming);

const RESPONSES_CALLS: Record<string, Call<OpenAI>> = {
  'responses.create': async (c, p) => {
    const response = await c.responses.create(p);
    return { response, output_text: (response as any).output_text, request_id: response._request_id };
  },
  'responses.create().withResponse()': async (c, p) => {
    const { data, request_id } = await c.responses.create(p).withResponse();
    return { data, request_id };
  },
  'responses.parse()': async (c, p) => c.responses.parse(p),
  'stream: true, for await': async (c, p) => collect(await responsesStream(c, p)),
  'stream: true, tee()': async (c, p) => {
    const [left, right] = (await responsesStream(c, p)).tee();
    return { left: await collect(left), right: await collect(right) };
  },
  'stream: true, toReadableStream()': async (c, p) => readText((await responsesStream(c, p)).toReadableStream()),
  'responses.stream()': async (c, p) => {
    const s = c.responses.stream(p);
    const events = await collect(s);
    return { events, final: await s.finalResponse() };
  },
};

toolOrderTests<OpenAI>({
  ...SDK, name: 'openai responses', sessionPrefix: 'oa-resp',
  params: responsesParams, tools: RESPONSES_TOOLS, toolName: (t) => t.name, calls: RESPONSES_CALLS,
});

// ---- What is reported

test('openai: the usage reported is the response\'s, the stream\'s usage chunk, or response.completed\'s', async () => {
  const reporter = new Reporter({ address: d.address });
  let n = 0;
  const session = 'oa-usage';
  const calls = [
    (c: OpenAI) => c.chat.completions.create(chatParams(session, CHAT_TOOLS)),
    async (c: OpenAI) => collect(await chatStream(c, chatParams(session, CHAT_TOOLS))),
    (c: OpenAI) => c.responses.create(responsesParams(session, RESPONSES_TOOLS)),
    async (c: OpenAI) => collect(await responsesStream(c, responsesParams(session, RESPONSES_TOOLS))),
  ];
  await runCalls(instrumented(SDK, reporter, { sessionId: session, requestId: () => `u${n++}` }),
    async (c, i) => calls[i](c), [0, 1, 2, 3]);
  await daemon.drain(reporter, 8);
  assert.deepEqual(await daemon.turns(d.db, session, 4),
    ['u0|1|0|12', `u1|1|${OPENAI_CACHED_TOKENS}|12`, 'u2|1|0|12', `u3|1|${OPENAI_CACHED_TOKENS}|12`]);
  const rows = daemon.sql(d.db, `SELECT provider, raw_usage_json FROM turns WHERE session_id = '${session}'
    ORDER BY request_id`).map((r) => r.split('|'));
  assert.deepEqual(rows.map((r) => r[0]), ['openai', 'openai', 'openai', 'openai']);
  assert.deepEqual(rows.map((r) => JSON.parse(r[1])),
    [chatUsage(false), chatUsage(true), responsesUsage(false), responsesUsage(true)]);
});

test('openai: a chat stream without stream_options.include_usage reports no usage; the caller gets every chunk', async () => {
  const session = 'oa-no-usage';
  const call: Call<OpenAI> = async (c, p) =>
    collect(await c.chat.completions.create({ ...p, stream: true } as OpenAI.ChatCompletionCreateParamsStreaming));
  await expectSnapshotOnly(SDK, session, 'n0', call, chatParams(session, CHAT_TOOLS));
});

test('openai: .asResponse() gives the caller the unread body; the snapshot is reported, no usage', async () => {
  const session = 'oa-as-response';
  const call: Call<OpenAI> = async (c, p) => {
    const response = await c.chat.completions.create(p).asResponse();
    return { status: response.status, body: await response.json() };
  };
  await expectSnapshotOnly(SDK, session, 'r0', call, chatParams(session, CHAT_TOOLS));
});
