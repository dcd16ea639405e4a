// The Reporter against a real cachewatchd (path in env CACHEWATCHD).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as path from 'node:path';
import { instrumentAnthropic, Reporter, Snapshot, SnapshotBuilder, Tool, ToolOrder, toTimestamp, Usage } from '../src/index.js';
import * as daemon from './support/daemon.js';

const d = daemon.useDaemon('reporter');

const AGENT = 'ts-test';
const base = Date.now() - 120_000;

function usage(session: string, requestId: string, atMs: number, read: number, write: number): Usage {
  return {
    agent: AGENT, session_id: session, request_id: requestId,
    response_time: toTimestamp(new Date(atMs)), provider: 'PROVIDER_ANTHROPIC', model: 'claude-sonnet-4-5',
    raw_usage_json: JSON.stringify({
      input_tokens: 40, cache_read_input_tokens: read, cache_creation_input_tokens: write, output_tokens: 10,
    }),
  };
}

const breaks = (session: string) => daemon.breaks(d.db, session);

const TOOLS: Tool[] = [
  { name: 'shell', definition: '{"name":"shell","input_schema":{"type":"object"}}' },
  { name: 'read_file', definition: '{"name":"read_file","input_schema":{"type":"object"}}' },
  { name: 'mcp__github__search', definition: '{"name":"mcp__github__search","input_schema":{"type":"object"}}' },
];

test('10 turns: 20 records acked by the daemon', async () => {
  const reporter = new Reporter({ address: d.address });
  const b = new SnapshotBuilder({ agent: AGENT, sessionId: 'ten' });
  for (let i = 0; i < 10; i++) {
    const at = base + i * 2000;
    assert.equal(reporter.reportSnapshot(b.build({
      requestId: `r${i}`, time: new Date(at), provider: 'PROVIDER_ANTHROPIC', model: 'claude-sonnet-4-5',
      systemPrompt: 'sys', tools: TOOLS,
    })), true);
    assert.equal(reporter.reportUsage(usage('ten', `r${i}`, at + 1000, 0, 20000)), true);
  }
  assert.equal(await reporter.flush(15000), true);
  const s = reporter.stats();
  assert.equal(s.enqueued, 20);
  assert.equal(s.acked, 20);
  assert.equal(s.rejected, 0);
  assert.equal(s.dropped, 0);
  assert.ok(s.sent >= 20);
  await reporter.close();
});

async function twoTurns(session: string, order: (tools: Tool[]) => Tool[], policy: Snapshot['tool_order_policy'],
  secondRead = 0) {
  const reporter = new Reporter({ address: d.address });
  const b = new SnapshotBuilder({ agent: AGENT, sessionId: session });
  // Registration order differs between the turns (MCP discovery races).
  const registrations = [TOOLS, [TOOLS[2], TOOLS[0], TOOLS[1]]];
  for (let i = 0; i < 2; i++) {
    const at = base + 60_000 + i * 5000;
    const snap = b.build({
      requestId: `t${i}`, time: new Date(at), provider: 'PROVIDER_ANTHROPIC', model: 'claude-sonnet-4-5',
      systemPrompt: 'sys', tools: registrations[i],
    });
    // What the agent actually sends, in its order.
    const byName = new Map(snap.tools!.map((t) => [t.name, t]));
    snap.tools = order(registrations[i]).map((t) => byName.get(t.name)!);
    snap.tool_order_policy = policy;
    reporter.reportSnapshot(snap);
    reporter.reportUsage(usage(session, `t${i}`, at + 1000, i === 0 ? 0 : secondRead, i === 0 ? 20000 : 20000 - secondRead));
  }
  assert.equal(await reporter.flush(15000), true);
  assert.equal(reporter.stats().acked, 4);
  await reporter.close();
}

const waitForBreaks = (session: string, n: number) => daemon.waitForBreaks(d.db, session, n);

test('tools in registration order: a tools_order_changed break', async () => {
  await twoTurns('registration', (tools) => tools, 'TOOL_ORDER_POLICY_REGISTRATION');
  assert.deepEqual(await waitForBreaks('registration', 1), ['tools_order_changed']);
});

test('the lexicographic policy: same order, no tools reason', async () => {
  const policy = ToolOrder.lexicographic();
  // The same cache miss: the daemon finds nothing changed on the client side.
  await twoTurns('lexicographic-miss', (tools) => policy.order(tools), 'TOOL_ORDER_POLICY_LEXICOGRAPHIC');
  assert.deepEqual(await waitForBreaks('lexicographic-miss', 1), ['likely_provider_eviction']);
  // And with the cache read the stable order gives: no break at all.
  await twoTurns('lexicographic', (tools) => policy.order(tools), 'TOOL_ORDER_POLICY_LEXICOGRAPHIC', 20000);
  await new Promise((r) => setTimeout(r, 300));
  assert.deepEqual(breaks('lexicographic'), []);
});

test('instrumentAnthropic: tools reordered, snapshot and usage reported per call', async () => {
  const reporter = new Reporter({ address: d.address });
  const sent: Array<{ tools: Array<{ name: string }> }> = [];
  const fake = {
    messages: {
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      create: async (params: any) => {
        sent.push(params);
        return { model: params.model, content: [], usage: {
          input_tokens: 40, cache_read_input_tokens: sent.length === 1 ? 0 : 20000,
          cache_creation_input_tokens: sent.length === 1 ? 20000 : 0, output_tokens: 10 } };
      },
    },
  };
  let n = 0;
  const client = instrumentAnthropic(fake, reporter, {
    agent: AGENT, sessionId: 'anthropic', requestId: () => `a${n++}`,
  });
  const defs = TOOLS.map((t) => JSON.parse(t.definition as string));
  for (const tools of [defs, [defs[2], defs[0], defs[1]]]) {
    const resp = await client.messages.create({
      model: 'claude-sonnet-4-5', max_tokens: 100, system: 'sys', tools,
      cache_control: { type: 'ephemeral' },
      messages: [{ role: 'user', content: 'hi' }],
    });
    assert.equal(resp.usage.output_tokens, 10);
  }
  assert.deepEqual(sent.map((p) => p.tools.map((t) => t.name)),
    [['mcp__github__search', 'read_file', 'shell'], ['mcp__github__search', 'read_file', 'shell']]);
  assert.equal(client.cachewatch.skipped, 0);
  assert.equal(await reporter.flush(15000), true);
  assert.equal(reporter.stats().acked, 4);
  await reporter.close();
  await new Promise((r) => setTimeout(r, 300));
  assert.deepEqual(breaks('anthropic'), []);
});

test('daemon down: report calls return at once, drops counted', async () => {
  const port = await daemon.freePort();  // Nobody listens there.
  const reporter = new Reporter({ address: `127.0.0.1:${port}`, maxQueuedRecords: 5, initialBackoffMs: 10, maxBackoffMs: 50 });
  const b = new SnapshotBuilder({ agent: AGENT, sessionId: 'down' });
  const snap = b.build({ requestId: 'x', provider: 'PROVIDER_ANTHROPIC', model: 'm' });
  const start = performance.now();
  let accepted = 0;
  for (let i = 0; i < 50; i++) {
    if (reporter.reportSnapshot({ ...snap, request_id: `x${i}` })) accepted++;
  }
  const elapsed = performance.now() - start;
  // Generous bounds (a loaded CI machine); a blocking call would take seconds.
  assert.ok(elapsed < 1000, `50 report calls took ${elapsed} ms`);
  // Still before the first send attempt (no timer has run): the cap counts
  // exactly. Later, once the sender has moved the queued records in flight,
  // the queue has room again, so the counts below are taken here.
  for (let i = 0; i < 10; i++) {
    const t0 = performance.now();
    assert.equal(reporter.reportUsage(usage('down', `y${i}`, Date.now(), 0, 0)), false);
    assert.ok(performance.now() - t0 < 250);
  }
  assert.equal(accepted, 5);
  assert.equal(reporter.stats().enqueued, 5);
  assert.equal(reporter.stats().dropped, 55);
  for (let i = 0; i < 100 && reporter.stats().retried === 0; i++) await new Promise((r) => setTimeout(r, 50));
  const s = reporter.stats();
  assert.equal(s.enqueued, 5);
  assert.equal(s.acked, 0);
  assert.equal(s.connected, false);
  assert.ok(s.retried > 0, JSON.stringify(s));
  assert.equal(await reporter.flush(100), false);
  await reporter.close(0);
});

test('records queued while the daemon is down are delivered once it is up', async () => {
  const port = await daemon.freePort();
  const reporter = new Reporter({ address: `127.0.0.1:${port}`, initialBackoffMs: 20, maxBackoffMs: 200 });
  const at = Date.now() - 10_000;
  const b = new SnapshotBuilder({ agent: AGENT, sessionId: 'late' });
  assert.equal(reporter.reportSnapshot(b.build({ requestId: 'l0', time: new Date(at),
    provider: 'PROVIDER_ANTHROPIC', model: 'claude-sonnet-4-5', tools: TOOLS })), true);
  assert.equal(reporter.reportUsage(usage('late', 'l0', at + 1000, 0, 20000)), true);
  await new Promise((r) => setTimeout(r, 400));
  assert.equal(reporter.stats().acked, 0);
  const second = await daemon.spawnDaemon(`127.0.0.1:${port}`, path.join(d.dir, 'db2'));
  try {
    assert.equal(await reporter.flush(15000), true);
    const s = reporter.stats();
    assert.equal(s.acked, 2);
    assert.equal(s.dropped, 0);
    assert.ok(s.retried > 0 && s.reconnects > 0, JSON.stringify(s));
    await reporter.close();
  } finally {
    second.proc.kill('SIGKILL');
  }
});

/** Records a daemon received since it started: the sum of its cachewatch_ingest_records_total series. */
async function ingestedRecords(metrics: string): Promise<number> {
  const text = await (await fetch(`http://${metrics}/metrics`)).text();
  return text.split('\n').filter((l) => l.startsWith('cachewatch_ingest_records_total{'))
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
}

// A SIGTERMed daemon acknowledges everything it stored before it ends the
// stream, so the reporter resends exactly what it has no ack for: the
// restarted daemon receives each of those once and nothing else.
test('daemon SIGTERMed and restarted: only the unacknowledged records are resent', async () => {
  const port = await daemon.freePort();
  const db = path.join(d.dir, 'sigterm-db');
  const first = await daemon.spawnDaemon(`127.0.0.1:${port}`, db);
  const reporter = new Reporter({ address: `127.0.0.1:${port}`, initialBackoffMs: 20, maxBackoffMs: 200 });
  const records = 2000;
  for (let i = 0; i < records; i++) {
    assert.equal(reporter.reportUsage(usage('sigterm', `t${i}`, Date.now(), 0, 100)), true);
  }
  for (let i = 0; i < 500 && reporter.stats().sent < reporter.stats().acked + 20; i++) {
    await new Promise((r) => setTimeout(r, 1));
  }
  const exited = new Promise((r) => first.proc.once('exit', r));
  first.proc.kill('SIGTERM');
  await exited;
  const ackedBefore = reporter.stats().acked;
  assert.ok(ackedBefore < records, JSON.stringify(reporter.stats()));
  const second = await daemon.spawnDaemon(`127.0.0.1:${port}`, db);
  try {
    assert.equal(await reporter.flush(20000), true);
    const s = reporter.stats();
    assert.equal(s.acked, records);
    assert.equal(s.rejected, 0);
    assert.equal(await ingestedRecords(second.metrics), records - ackedBefore);
    assert.deepEqual(daemon.sql(db, "SELECT count(*), count(DISTINCT request_id) FROM turns WHERE session_id = 'sigterm' AND usage_received = 1"),
      [`${records}|${records}`]);
    await reporter.close();
  } finally {
    second.proc.kill('SIGKILL');
  }
});

test('daemon killed mid-session: drops counted, nothing thrown', async () => {
  const reporter = new Reporter({ address: d.address, maxQueuedRecords: 3, initialBackoffMs: 10, maxBackoffMs: 50 });
  d.proc.kill('SIGKILL');
  await new Promise((r) => d.proc.once('exit', r));
  let ok = 0;
  for (let i = 0; i < 20; i++) if (reporter.reportUsage(usage('killed', `k${i}`, Date.now(), 0, 0))) ok++;
  await new Promise((r) => setTimeout(r, 300));
  const s = reporter.stats();
  assert.equal(ok, 3);
  assert.equal(s.dropped, 17);
  assert.equal(s.acked, 0);
  await reporter.close(0);
});
