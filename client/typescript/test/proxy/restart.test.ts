// A restart does not change what the proxy infers (docs/PROXY.md, "Lanes"):
// the lane heads are in memory, and a restarted daemon takes them back from
// the lanes' stored last turns. So a request whose system prompt or tools
// changed in the first turn after the restart still continues its lane, and
// the change is the break, as without a restart. Real @anthropic-ai/sdk, no
// x-cachewatch-lane header; one lane with no session at all, one in a session
// the header names.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import Anthropic from '@anthropic-ai/sdk';
import * as daemon from '../support/daemon.js';
import { startProviderServer } from '../support/provider_server.js';
import { history, tool } from './support.js';

/* eslint-disable @typescript-eslint/no-explicit-any */
const dir = mkdtempSync(path.join(tmpdir(), 'cachewatch-proxy-restart-'));
const db = path.join(dir, 'db');
after(() => rmSync(dir, { recursive: true, force: true }));

const TOOLS = ['shell', 'read_file', 'mcp__github__search'].map((n) => tool(n));
const EDITED = TOOLS.map((t) => (t.name === 'read_file' ? tool('read_file', { path: { type: 'string' } }) : t));

const params = (first: string, n: number, extra: any = {}): any => ({
  model: 'claude-sonnet-4-6', max_tokens: 100, system: 'You are the restarted agent.', tools: TOOLS,
  messages: history(first, n), ...extra,
});

function stopped(proc: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (proc.exitCode !== null) resolve(proc.exitCode);
    else proc.on('exit', (code) => resolve(code));
  });
}

/** "session|lane|verdict|primary_reason" of each turn of `agent`, once `n` are classified (10 s at most). */
async function classified(agent: string, n: number): Promise<string[]> {
  const q = `SELECT session_id, lane, verdict, primary_reason FROM turns WHERE agent = '${agent}'
             ORDER BY request_time_us`;
  for (let i = 0; i < 100; i++) {
    const got = daemon.sql(db, q);
    if (got.length >= n && got.every((l) => !['', 'pending'].includes(l.split('|')[2]))) return got;
    await new Promise((r) => setTimeout(r, 100));
  }
  return daemon.sql(db, q);
}

test('the first turn after a restart, with a changed system prompt or tools, continues its inferred lane', async () => {
  const upstream = await startProviderServer();
  const flags = ['--proxy-listen=127.0.0.1:0', `--proxy-upstream=anthropic=${upstream.url}`];
  const client = (proxy: string, headers: Record<string, string>) =>
    new Anthropic({ apiKey: 'sk-ant-secret', baseURL: `http://${proxy}`, maxRetries: 0, defaultHeaders: headers });
  let proc: ChildProcess | undefined;
  try {
    const first = await daemon.spawnDaemon('127.0.0.1:0', db, flags);
    proc = first.proc;
    await client(first.proxy, {}).messages.create(params('no session, before the restart', 1));
    await client(first.proxy, { 'x-cachewatch-agent': 'restart-test', 'x-cachewatch-session': 'restart-s' })
      .messages.create(params('a session, before the restart', 1));
    assert.equal((await classified('proxy', 1)).length, 1);
    assert.equal((await classified('restart-test', 1)).length, 1);
    first.proc.kill('SIGTERM');
    assert.equal(await stopped(first.proc), 0);

    const second = await daemon.spawnDaemon('127.0.0.1:0', db, flags);
    proc = second.proc;
    await client(second.proxy, {}).messages.create(
      params('no session, before the restart', 2, { system: 'You are the restarted agent. Today is 2026-12-02.' }));
    await client(second.proxy, { 'x-cachewatch-agent': 'restart-test', 'x-cachewatch-session': 'restart-s' })
      .messages.create(params('a session, before the restart', 2, { tools: EDITED }));

    const none = await classified('proxy', 2);
    assert.equal(none.length, 2, none.join('\n'));
    const [noneSession, noneLane] = none[0].split('|');
    assert.match(noneSession, /^inferred-[0-9a-f]{12}$/);
    assert.deepEqual(none.map((l) => l.split('|').slice(0, 2).join('|')), [`${noneSession}|${noneLane}`,
      `${noneSession}|${noneLane}`]);
    assert.equal(none[1].split('|')[3], 'system_changed');

    const named = await classified('restart-test', 2);
    assert.equal(named.length, 2, named.join('\n'));
    const lane = named[0].split('|')[1];
    assert.match(lane, /^inferred-[0-9a-f]{8}$/);
    assert.deepEqual(named.map((l) => l.split('|').slice(0, 2).join('|')), [`restart-s|${lane}`, `restart-s|${lane}`]);
    assert.equal(named[1].split('|')[3], 'tools_schema_changed');
  } finally {
    if (proc && proc.exitCode === null) proc.kill('SIGKILL');
    await upstream.close();
  }
});
