// instrumentOpenAI and instrumentAnthropic (streaming) with fake SDK-shaped
// clients against a real cachewatchd (path in env CACHEWATCHD).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync, ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { instrumentAnthropic, instrumentOpenAI, Reporter } from '../src/index.js';

/* eslint-disable @typescript-eslint/no-explicit-any */
const CACHEWATCHD = process.env.CACHEWATCHD;
let daemon: ChildProcess | null = null;
let address = '';
let dir = '';
let db = '';

before(async () => {
  assert.ok(CACHEWATCHD, 'set CACHEWATCHD to the cachewatchd binary');
  dir = mkdtempSync(path.join(tmpdir(), 'cachewatch-ts-instr-'));
  db = path.join(dir, 'db');
  const proc = spawn(CACHEWATCHD!, ['--listen=127.0.0.1:0', '--metrics-listen=127.0.0.1:0', `--db-path=${db}`],
    { stdio: ['ignore', 'ignore', 'pipe'] });
  daemon = proc;
  address = await new Promise<string>((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error(`daemon did not start: ${buf}`)), 20000);
    proc.on('exit', (code) => reject(new Error(`daemon exited ${code}: ${buf}`)));
    proc.stderr!.on('data', (chunk: Buffer) => {
      buf += chunk.toString();
      for (const line of buf.split('\n')) {
        try {
          const j = JSON.parse(line);
          if (j.msg === 'listening' && j.grpc) {
            clearTimeout(timer);
            resolve(j.grpc);
          }
        } catch { /* partial line */ }
      }
    });
  });
});

after(() => {
  if (daemon && daemon.exitCode === null) daemon.kill('SIGKILL');
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const AGENT = 'ts-instrument';

function sql(query: string): string[] {
  return execFileSync('sqlite3', [db, query]).toString().split('\n').filter((l) => l !== '');
}

/** "request_id|usage_received|cache_read_tokens|output_tokens" per turn, once `n` turns have their usage. */
async function turns(session: string, n: number): Promise<string[]> {
  const q = `SELECT request_id, usage_received, cache_read_tokens, output_tokens FROM turns
             WHERE session_id = '${session}' ORDER BY request_id`;
  for (let i = 0; i < 100; i++) {
    const got = sql(q);
    if (got.length >= n && got.every((l) => l.split('|')[1] === '1')) return got;
    await new Promise((r) => setTimeout(r, 100));
  }
  return sql(q);
}

function breaks(session: string): string[] {
  return sql(`SELECT primary_reason FROM prompt_cache_breaks WHERE session_id = '${session}'`);
}

async function* iterate<T>(items: T[]): AsyncGenerator<T> {
  for (const item of items) {
    await new Promise((r) => setImmediate(r));
    yield item;
  }
}

async function drain(reporter: Reporter, records: number): Promise<void> {
  assert.equal(await reporter.flush(15000), true);
  const s = reporter.stats();
  assert.equal(s.acked, records, JSON.stringify(s));
  assert.equal(s.rejected, 0);
  await reporter.close();
}

const CHAT_TOOLS = ['shell', 'read_file', 'mcp__github__search'].map((name) => ({
  type: 'function', function: { name, description: name, parameters: { type: 'object', properties: {} } },
}));

test('instrumentOpenAI chat, non-streaming: the caller gets the response, the usage reaches the daemon', async () => {
  const reporter = new Reporter({ address });
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
  const reporter = new Reporter({ address });
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
  const reporter = new Reporter({ address });
  const usage = { input_tokens: 4000, input_tokens_details: { cached_tokens: 3072 },
    output_tokens: 5, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 4005 };
  const events = [
    { type: 'response.created', sequence_number: 0, response: { id: 'resp_1', status: 'in_progress', usage: null } },
    { type: 'response.output_text.delta', sequence_number: 1, item_id: 'msg_1', output_index: 0, content_index: 0, delta: 'hi' },
    { type: 'response.output_text.done', sequence_number: 2, item_id: 'msg_1', output_index: 0, content_index: 0, text: 'hi' },
    { type: 'response.completed', sequence_number: 3,
      response: { id: 'resp_1', status: 'completed', model: 'gpt-5-2025-08-07', usage } },
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
});

test('instrumentAnthropic, streaming: every event passes through, message_start + message_delta usage reported', async () => {
  const reporter = new Reporter({ address });
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
  const reporter = new Reporter({ address });
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
