// FleetReporter: rendezvous routing (pure), and against two real daemons:
// each lane on one daemon, failover when its daemon dies (with records on
// their way to it, or idle), and the lane back on it once it is restarted.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { FleetReporter, laneKeyOf, rendezvousOrder, toTimestamp, Usage } from '../src/index.js';
import * as daemon from './support/daemon.js';

const AGENT = 'ts-fleet';

test('rendezvous order: stable, spread, and only the lanes of a removed daemon move', () => {
  const all = ['a:1', 'b:2', 'c:3'];
  const lanes = Array.from({ length: 300 }, (_, i) => laneKeyOf({ agent: AGENT, session_id: `s${i}` }));
  const first = new Map<string, string>();
  const counts = new Map<string, number>();
  for (const lane of lanes) {
    const order = rendezvousOrder(lane, all);
    assert.deepEqual(order, rendezvousOrder(lane, [...all].reverse()), 'independent of list order');
    assert.equal(new Set(order).size, 3);
    first.set(lane, order[0]);
    counts.set(order[0], (counts.get(order[0]) ?? 0) + 1);
  }
  for (const a of all) assert.ok((counts.get(a) ?? 0) > 50, `${a} gets a share: ${counts.get(a)}`);
  for (const lane of lanes) {
    const without = rendezvousOrder(lane, ['a:1', 'c:3'])[0];
    if (first.get(lane) !== 'b:2') assert.equal(without, first.get(lane), 'a lane not on b stays put');
  }
  assert.equal(laneKeyOf({ agent: 'x', session_id: 's' }), laneKeyOf({ agent: 'x', session_id: 's', lane: 'main' }));
});

function usage(session: string, requestId: string): Usage {
  return {
    agent: AGENT, session_id: session, request_id: requestId,
    response_time: toTimestamp(new Date(Date.now() - 60_000)), provider: 'PROVIDER_ANTHROPIC',
    model: 'claude-sonnet-4-5',
    raw_usage_json: JSON.stringify({ input_tokens: 40, cache_read_input_tokens: 0, cache_creation_input_tokens: 2000, output_tokens: 10 }),
  };
}

async function until(what: string, check: () => boolean, ms = 15000): Promise<void> {
  for (let waited = 0; !check(); waited += 50) {
    assert.ok(waited < ms, `timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const stored = (db: string, session: string) =>
  daemon.sql(db, `SELECT request_id FROM turns WHERE session_id = '${session}' ORDER BY request_id`);

interface TwoDaemons { addresses: string[]; dbs: string[]; procs: daemon.Spawned[]; fleet: FleetReporter }

// Two daemons on ports picked in advance, each on its own database, and a
// FleetReporter over both with short backoffs and probes; all stopped after.
async function withTwoDaemons(body: (two: TwoDaemons) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(path.join(tmpdir(), 'cachewatch-ts-fleet-'));
  const ports = [await daemon.freePort(), await daemon.freePort()];
  const addresses = ports.map((p) => `127.0.0.1:${p}`);
  const dbs = [path.join(dir, 'a.db'), path.join(dir, 'b.db')];
  const procs = [await daemon.spawnDaemon(addresses[0], dbs[0]), await daemon.spawnDaemon(addresses[1], dbs[1])];
  const fleet = new FleetReporter({ addresses, probeIntervalMs: 50, initialBackoffMs: 20, maxBackoffMs: 200 });
  try {
    await body({ addresses, dbs, procs, fleet });
  } finally {
    await fleet.close(0);
    for (const p of procs) if (p.proc.exitCode === null) p.proc.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
}

test('two daemons: lanes stay on one, fail over when it dies, come back when it returns', () =>
  withTwoDaemons(async ({ addresses, dbs, procs, fleet }) => {
    // Ten lanes, two turns each: every lane's records in its first daemon only.
    const sessions = Array.from({ length: 10 }, (_, i) => `lane${i}`);
    for (const s of sessions) for (const r of ['r0', 'r1']) assert.equal(fleet.reportUsage(usage(s, r)), true);
    assert.equal(await fleet.flush(10000), true);
    for (const s of sessions) {
      const home = addresses.indexOf(rendezvousOrder(laneKeyOf({ agent: AGENT, session_id: s }), addresses)[0]);
      assert.deepEqual(stored(dbs[home], s), ['r0', 'r1'], `${s} on its daemon`);
      assert.deepEqual(stored(dbs[1 - home], s), [], `${s} not on the other`);
    }
    // A lane whose home is daemon 0.
    const lane = sessions.find((s) => fleet.addressFor({ agent: AGENT, session_id: s }) === addresses[0])!;
    assert.ok(lane, 'some lane lives on daemon 0');
    // Daemon 0 hangs, then dies, with r2 on its way to it: a hung daemon's
    // connection stays open, so r2 is queued for it whatever the timing, and
    // stays queued for it once it is gone. (Hung once all its threads are
    // stopped: until then one could still ack r2; and a daemon killed
    // outright could be found gone by the fleet's probes before r2 is
    // reported, which moves the lane first: the next test.)
    await daemon.suspend(procs[0].proc);
    fleet.reportUsage(usage(lane, 'r2'));
    procs[0].proc.kill('SIGKILL');
    await new Promise((r) => procs[0].proc.once('exit', r));
    await until('daemon 0 seen failing', () => fleet.addressFor({ agent: AGENT, session_id: lane }) === addresses[1]);
    fleet.reportUsage(usage(lane, 'r3'));
    await until('r3 on daemon 1', () => stored(dbs[1], lane).includes('r3'));
    // Daemon 0 returns on the same port: its queued r2 arrives and the lane comes home.
    procs[0] = await daemon.spawnDaemon(addresses[0], dbs[0]);
    await until('r2 delivered to daemon 0', () => stored(dbs[0], lane).includes('r2'));
    await until('lane back on daemon 0', () => fleet.addressFor({ agent: AGENT, session_id: lane }) === addresses[0]);
    fleet.reportUsage(usage(lane, 'r4'));
    assert.equal(await fleet.flush(10000), true);
    assert.deepEqual(stored(dbs[0], lane), ['r0', 'r1', 'r2', 'r4']);
    assert.deepEqual(stored(dbs[1], lane), ['r3']);
  }));

// The Node reporter closes its stream when idle, so no stream sees its
// daemon die; the fleet's probes ask the channel instead, and the lane moves
// before its next record, which reaches the other daemon rather than waiting
// for the dead one.
test('two daemons: a lane leaves a daemon that died while its reporter was idle', () =>
  withTwoDaemons(async ({ addresses, dbs, procs, fleet }) => {
    const lane = Array.from({ length: 100 }, (_, i) => `idle${i}`).find(
      (s) => rendezvousOrder(laneKeyOf({ agent: AGENT, session_id: s }), addresses)[0] === addresses[0])!;
    for (const r of ['r0', 'r1']) assert.equal(fleet.reportUsage(usage(lane, r)), true);
    assert.equal(await fleet.flush(10000), true);
    assert.deepEqual(stored(dbs[0], lane), ['r0', 'r1']);

    procs[0].proc.kill('SIGKILL');
    await new Promise((r) => procs[0].proc.once('exit', r));
    await until('daemon 0 seen failing', () => fleet.addressFor({ agent: AGENT, session_id: lane }) === addresses[1]);
    fleet.reportUsage(usage(lane, 'r2'));
    assert.equal(await fleet.flush(10000), true);
    assert.deepEqual(stored(dbs[1], lane), ['r2']);
    assert.equal(fleet.stats()[addresses[0]].enqueued, 2);

    procs[0] = await daemon.spawnDaemon(addresses[0], dbs[0]);
    await until('lane back on daemon 0', () => fleet.addressFor({ agent: AGENT, session_id: lane }) === addresses[0]);
    fleet.reportUsage(usage(lane, 'r3'));
    assert.equal(await fleet.flush(10000), true);
    assert.deepEqual(stored(dbs[0], lane), ['r0', 'r1', 'r3']);
  }));
