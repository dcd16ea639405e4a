// instrumentOpenAI and instrumentAnthropic (streaming) with fake SDK-shaped
// clients against a real cachewatchd (path in env CACHEWATCHD).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { instrumentAnthropic, instrumentOpenAI, Reporter } from '../src/index.js';
import * as daemon from './support/daemon.js';

/* eslint-disable @typescript-eslint/no-explicit-any */
const d = daemon.useDaemon('instr');
const AGENT = 'ts-instrument';
const sql = (query: string) => daemon.sql(d.db, query);
const turns = (session: string, n: number) => daemon.turns(d.db, session, n);
const breaks = (session: string) => daemon.breaks(d.db, session);
const drain = daemon.drain;

async function* iterate<T>(items: T[]): AsyncGenerator<T> {
  for (const item of items) {
    await new Promise((r) => setImmediate(r));
    yield item;
  }
}

const CHAT_TOOLS = ['shell', 'read_file', 'mcp__github__search'].map((name) => ({
  type: 'function', function: { name, description: name, parameters: { type: 'object', properties: {} } },
}));

test('instrumentOpenAI chat, non-streaming: the caller gets the response, the usage reaches the daemon', async () => {
  const reporter = new Reporter({ address: d.address });
  const canned = {
    id: 'chatcmpl-1', object: 'chat.completion', model: 'gpt-4.1-2025-04-14',
    choices: [{ index: 0, message: { role: 'assistant', content: 'hello' }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 2100, completion_tokens: 12, total_tokens: 2112,
      prompt_tokens_details: { cached_tokens: 1536, audio_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 0 } },
  };
  const sent: any[] = [];
  const fake = { chat: { completions: { create: async (p: any) => { sent.push(p); return canned; } } } };
  const client = instrumentOpenAI(fake, reporter, { agent: AGENT, sessionId: 'oa-chat', requestId: () => 'c0' });
  const resp = await client.chat.completions.create({
    model: 'gpt-4.1', tools: CHAT_TOOLS,
    messages: [{ role: 'system', content: 'sys' }, { role: 'user', content: 'hi' }],
  });
  assert.equal(resp, canned);
  assert.deepEqual(resp, structuredClone(canned));
  assert.deepEqual(sent[0].tools.map((t: any) => t.function.name), ['mcp__github__search', 'read_file', 'shell']);
  assert.equal(client.cachewatch.skipped, 0);
  await drain(reporter, 2);
  assert.deepEqual(await turns('oa-chat', 1), ['c0|1|1536|12']);
  assert.equal(sql(`SELECT provider FROM turns WHERE session_id = 'oa-chat'`)[0], 'openai');
  assert.deepEqual(JSON.parse(sql(`SELECT raw_usage_json FROM turns WHERE session_id = 'oa-chat'`)[0]), canned.usage);
});

test('instrumentOpenAI chat, streaming: every chunk passes through, the usage chunk is reported', async () => {
  const reporter = new Reporter({ address: d.address });
  const chunk = (delta: any, extra: any = {}) => ({
    id: 'chatcmpl-2', object: 'chat.completion.chunk', model: 'gpt-4.1-2025-04-14',
    choices: [{ index: 0, delta, finish_reason: null }], usage: null, ...extra,
  });
  const chunks = [
    chunk({ role: 'assistant', content: '' }), chunk({ content: 'hel' }), chunk({ content: 'lo' }),
    chunk({}, { choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] }),
    chunk({}, { choices: [], usage: { prompt_tokens: 3000, completion_tokens: 7, total_tokens: 3007,
      prompt_tokens_details: { cached_tokens: 2560 } } }),
  ];
  const expected = structuredClone(chunks);
  let stream: any = null;
  const fake = { chat: { completions: { create: async (p: any) => { void p; stream = iterate(chunks); return stream; } } } };
  const client = instrumentOpenAI(fake, reporter, { agent: AGENT, sessionId: 'oa-chat-stream', requestId: () => 's0' });
  const got = await client.chat.completions.create({
    model: 'gpt-4.1', stream: true, stream_options: { include_usage: true }, tools: CHAT_TOOLS,
    messages: [{ role: 'developer', content: 'sys' }, { role: 'user', content: 'hi' }],
  });
  assert.equal(got, stream);
  const received: any[] = [];
  for await (const c of got) received.push(c);
  assert.equal(received.length, chunks.length);
  received.forEach((c, i) => assert.equal(c, chunks[i]));
  assert.deepEqual(received, expected);
  await drain(reporter, 2);
  assert.deepEqual(await turns('oa-chat-stream', 1), ['s0|1|2560|7']);
});

test('instrumentOpenAI responses, streaming: every event passes through, response.completed is reported', async () => {
  const reporter = new Reporter({ address: d.address });
  const usage = { input_tokens: 4000, input_tokens_details: { cached_tokens: 3072 },
    output_tokens: 5, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 4005 };
  const events = [
    { type: 'response.created', sequence_number: 0, response: { id: 'resp_1', status: 'in_progress', usage: null } },
    { type: 'response.output_text.delta', sequence_number: 1, item_id: 'msg_1', output_index: 0, content_index: 0, delta: 'hi' },
    { type: 'response.output_text.done', sequence_number: 2, item_id: 'msg_1', output_index: 0, content_index: 0, text: 'hi' },
    { type: 'response.completed', sequence_number: 3,
      response: { id: 'resp_1', status: 'completed', model: 'gpt-5-2025-08-07', usage,
        prompt_cache_diagnostics: { type: 'cache_hit' } } },
  ];
  const expected = structuredClone(events);
  const sent: any[] = [];
  let stream: any = null;
  const fake = { responses: { create: async (p: any) => { sent.push(p); stream = iterate(events); return stream; } } };
  const client = instrumentOpenAI(fake, reporter, { agent: AGENT, sessionId: 'oa-responses', requestId: () => 'r0' });
  const got = await client.responses.create({
    model: 'gpt-5', stream: true, instructions: 'sys', input: [{ role: 'user', content: 'hi' }],
    tools: [{ type: 'function', name: 'zeta', parameters: {} }, { type: 'function', name: 'alpha', parameters: {} }],
  });
  assert.equal(got, stream);
  const received: any[] = [];
  for await (const e of got) received.push(e);
  received.forEach((e, i) => assert.equal(e, events[i]));
  assert.deepEqual(received, expected);
  assert.deepEqual(sent[0].tools.map((t: any) => t.name), ['alpha', 'zeta']);
  await drain(reporter, 2);
  assert.deepEqual(await turns('oa-responses', 1), ['r0|1|3072|5']);
  // OpenAI's own diagnostics go to the daemon beside the usage.
  const raw = JSON.parse(sql(`SELECT raw_usage_json FROM turns WHERE session_id = 'oa-responses'`)[0]);
  assert.deepEqual(raw, { usage, prompt_cache_diagnostics: { type: 'cache_hit' } });
});

test('instrumentAnthropic, streaming: every event passes through, message_start + message_delta usage reported', async () => {
  const reporter = new Reporter({ address: d.address });
  const events = [
    { type: 'message_start', message: { id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-sonnet-4-5',
      content: [], stop_reason: null,
      usage: { input_tokens: 40, cache_read_input_tokens: 20000, cache_creation_input_tokens: 0, output_tokens: 1 } } },
    { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
    { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'hello' } },
    { type: 'content_block_stop', index: 0 },
    { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 15 } },
    { type: 'message_stop' },
  ];
  const expected = structuredClone(events);
  let stream: any = null;
  const fake = { messages: { create: async (p: any) => { void p; stream = iterate(events); return stream; } } };
  const client = instrumentAnthropic(fake, reporter, { agent: AGENT, sessionId: 'an-stream', requestId: () => 'm0' });
  const got = await client.messages.create({
    model: 'claude-sonnet-4-5', max_tokens: 100, stream: true, system: 'sys',
    messages: [{ role: 'user', content: 'hi' }],
  });
  assert.equal(got, stream);
  const received: any[] = [];
  for await (const e of got) received.push(e);
  received.forEach((e, i) => assert.equal(e, events[i]));
  assert.deepEqual(received, expected);
  await drain(reporter, 2);
  assert.deepEqual(await turns('an-stream', 1), ['m0|1|20000|15']);
  const raw = JSON.parse(sql(`SELECT raw_usage_json FROM turns WHERE session_id = 'an-stream'`)[0]);
  assert.deepEqual(raw, { input_tokens: 40, cache_read_input_tokens: 20000, cache_creation_input_tokens: 0, output_tokens: 15 });
});

test('instrumentOpenAI chat: tools registered in different orders, no tools_order_changed break', async () => {
  const reporter = new Reporter({ address: d.address });
  const sent: any[] = [];
  const fake = { chat: { completions: { create: async (p: any) => {
    sent.push(p);
    return { model: p.model, choices: [], usage: { prompt_tokens: 2100, completion_tokens: 10, total_tokens: 2110,
      prompt_tokens_details: { cached_tokens: sent.length === 1 ? 0 : 2048 } } };
  } } } };
  let n = 0;
  const client = instrumentOpenAI(fake, reporter, { agent: AGENT, sessionId: 'oa-order', requestId: () => `o${n++}` });
  const messages: any[] = [{ role: 'system', content: 'sys' }, { role: 'user', content: 'hi' }];
  for (const tools of [CHAT_TOOLS, [CHAT_TOOLS[2], CHAT_TOOLS[0], CHAT_TOOLS[1]]]) {
    const resp = await client.chat.completions.create({ model: 'gpt-4.1', tools, messages });
    messages.push({ role: 'assistant', content: 'ok' }, { role: 'user', content: 'more' });
    assert.equal(resp.usage.completion_tokens, 10);
  }
  assert.deepEqual(sent.map((p) => p.tools.map((t: any) => t.function.name)),
    [['mcp__github__search', 'read_file', 'shell'], ['mcp__github__search', 'read_file', 'shell']]);
  await drain(reporter, 4);
  assert.deepEqual(await turns('oa-order', 2), ['o0|1|0|10', 'o1|1|2048|10']);
  await new Promise((r) => setTimeout(r, 300));
  assert.ok(!breaks('oa-order').includes('tools_order_changed'));
  assert.deepEqual(breaks('oa-order'), []);
});

// Claude Code's layout: cache_control on the last tool and on the last system
// block. The second turn adds a tool (the breakpoint stays on the last one);
// its message_start carries Anthropic's cache diagnostics. The daemon must
// blame tools_added (not cache_control_changed) and store the provider's word.
test('instrumentAnthropic: breakpoint on the last tool follows it; diagnostics reach the break', async () => {
  const reporter = new Reporter({ address: d.address });
  const tool = (name: string, last: boolean) => ({
    name, description: `${name} `.repeat(400), input_schema: { type: 'object', properties: {} },
    ...(last ? { cache_control: { type: 'ephemeral' } } : {}),
  });
  const turn = (usage: any, diagnostics: any) => [
    { type: 'message_start', message: { id: 'msg', type: 'message', role: 'assistant', model: 'claude-sonnet-4-5',
      content: [], stop_reason: null, usage, ...(diagnostics ? { diagnostics } : {}) } },
    { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 9 } },
    { type: 'message_stop' },
  ];
  const replies = [
    turn({ input_tokens: 5, cache_read_input_tokens: 0, cache_creation_input_tokens: 30000, output_tokens: 1 }, null),
    turn({ input_tokens: 5, cache_read_input_tokens: 0, cache_creation_input_tokens: 31000, output_tokens: 1 },
      { cache_miss_reason: { type: 'tools_changed', cache_missed_input_tokens: 29000 } }),
  ];
  const sent: any[] = [];
  const fake = { messages: { create: async (p: any) => { sent.push(p); return iterate(replies[sent.length - 1]); } } };
  let n = 0;
  const client = instrumentAnthropic(fake, reporter, {
    agent: AGENT, sessionId: 'an-breakpoint', requestId: () => `b${n++}`, applyToolOrder: false,
  });
  const system = [{ type: 'text', text: 'You are an agent.', cache_control: { type: 'ephemeral' } }];
  const messages = [{ role: 'user', content: 'hi' }];
  for (const tools of [[tool('Bash', false), tool('Read', true)],
    [tool('Bash', false), tool('Read', false), tool('Write', true)]]) {
    const stream: any = await client.messages.create({
      model: 'claude-sonnet-4-5', max_tokens: 100, stream: true, system, tools, messages,
    });
    for await (const e of stream) void e;
  }
  await drain(reporter, 4);
  const got = await daemon.waitForBreaks(d.db, 'an-breakpoint', 1);
  assert.deepEqual(got, ['tools_added']);
  assert.deepEqual(sql(`SELECT provider_miss_reason, provider_missed_tokens, provider_agreement
    FROM prompt_cache_breaks WHERE session_id = 'an-breakpoint'`), ['tools_changed|29000|agree']);
  const raw = JSON.parse(sql(`SELECT raw_usage_json FROM turns WHERE session_id = 'an-breakpoint' AND request_id = 'b1'`)[0]);
  assert.deepEqual(raw.diagnostics, { cache_miss_reason: { type: 'tools_changed', cache_missed_input_tokens: 29000 } });
});
