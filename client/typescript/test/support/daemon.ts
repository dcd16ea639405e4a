// A real cachewatchd for the tests (the binary named by env CACHEWATCHD), on
// loopback with a fresh SQLite database in a temporary directory, and the
// queries the tests assert on. `useDaemon(prefix)` starts one before the
// file's tests and kills it after; `spawnDaemon` starts another one by hand.
// The database is read with the sqlite3 command line tool.
import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync, ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { Reporter } from '../../src/index.js';

/** What a started daemon logged: its gRPC, /metrics and (with --proxy-listen) proxy addresses. */
export interface Spawned { proc: ChildProcess; grpc: string; metrics: string; proxy: string }

/**
 * Starts cachewatchd listening on `listen` (host:port, port 0 for any), with `extra` flags; resolves with its
 * addresses.
 */
export function spawnDaemon(listen: string, dbPath: string, extra: string[] = []): Promise<Spawned> {
  const binary = process.env.CACHEWATCHD;
  assert.ok(binary, 'set CACHEWATCHD to the cachewatchd binary');
  const proc = spawn(binary, [`--listen=${listen}`, '--metrics-listen=127.0.0.1:0', `--db-path=${dbPath}`, ...extra],
    { stdio: ['ignore', 'ignore', 'pipe'] });
  return new Promise((resolve, reject) => {
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
            resolve({ proc, grpc: j.grpc, metrics: j.metrics ?? '', proxy: j.proxy ?? '' });
          }
        } catch { /* partial line */ }
      }
    });
  });
}

/**
 * SIGSTOPs the daemon and resolves once every thread of it has stopped: kill() returns before that, and until a
 * thread of it next enters the kernel the others go on serving.
 */
export async function suspend(proc: ChildProcess): Promise<void> {
  assert.ok(proc.pid !== undefined && proc.kill('SIGSTOP'), 'SIGSTOP sent');
  const tasks = `/proc/${proc.pid}/task`;
  // The state is the first field after the command name's closing parenthesis.
  // A thread that ended between the listing and the read is not running.
  const stopped = () => readdirSync(tasks).every((t) => {
    let stat: string;
    try {
      stat = readFileSync(path.join(tasks, t, 'stat'), 'utf8');
    } catch {
      return true;
    }
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('T');
  });
  for (let waited = 0; !stopped(); waited += 10) {
    assert.ok(waited < 10000, 'daemon stopped within 10 s');
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A loopback port nobody listens on (at the time of the call). */
export async function freePort(): Promise<number> {
  return new Promise<number>((resolve) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const p = (srv.address() as { port: number }).port;
      srv.close(() => resolve(p));
    });
  });
}

export interface TestDaemon {
  /** gRPC address, host:port. */
  address: string;
  /** The daemon's SQLite file and its temporary directory. */
  db: string;
  dir: string;
  proc: ChildProcess;
}

/** Starts a daemon before this file's tests and kills it after; its fields are set once `before` ran. */
export function useDaemon(prefix: string): TestDaemon {
  const d = { address: '', db: '', dir: '' } as TestDaemon;
  before(async () => {
    d.dir = mkdtempSync(path.join(tmpdir(), `cachewatch-ts-${prefix}-`));
    d.db = path.join(d.dir, 'db');
    const started = await spawnDaemon('127.0.0.1:0', d.db);
    d.proc = started.proc;
    d.address = started.grpc;
  });
  after(() => {
    if (d.proc && d.proc.exitCode === null) d.proc.kill('SIGKILL');
    if (d.dir) rmSync(d.dir, { recursive: true, force: true });
  });
  return d;
}

/** The rows of `query` as sqlite3 prints them ('|' between columns). */
export function sql(db: string, query: string): string[] {
  return execFileSync('sqlite3', [db, query]).toString().split('\n').filter((l) => l !== '');
}

/** primary_reason of each stored break of the session. */
export function breaks(db: string, session: string): string[] {
  return sql(db, `SELECT primary_reason FROM prompt_cache_breaks WHERE session_id = '${session}'`);
}

/** Polls until the session has `n` breaks (5 s at most); returns what it has then. */
export async function waitForBreaks(db: string, session: string, n: number): Promise<string[]> {
  for (let i = 0; i < 50; i++) {
    const got = breaks(db, session);
    if (got.length >= n) return got;
    await new Promise((r) => setTimeout(r, 100));
  }
  return breaks(db, session);
}

/** "request_id|usage_received|cache_read_tokens|output_tokens" per turn, once `n` turns have their usage. */
export async function turns(db: string, session: string, n: number): Promise<string[]> {
  const q = `SELECT request_id, usage_received, cache_read_tokens, output_tokens FROM turns
             WHERE session_id = '${session}' ORDER BY request_id`;
  for (let i = 0; i < 100; i++) {
    const got = sql(db, q);
    if (got.length >= n && got.every((l) => l.split('|')[1] === '1')) return got;
    await new Promise((r) => setTimeout(r, 100));
  }
  return sql(db, q);
}

/**
 * "request_id|verdict|primary_reason" per turn, once `n` turns are classified
 * (a verdict other than pending; 10 s at most).
 */
export async function verdicts(db: string, session: string, n: number): Promise<string[]> {
  const q = `SELECT request_id, verdict, primary_reason FROM turns
             WHERE session_id = '${session}' ORDER BY request_id`;
  for (let i = 0; i < 100; i++) {
    const got = sql(db, q);
    if (got.length >= n && got.every((l) => !['', 'pending'].includes(l.split('|')[1]))) return got;
    await new Promise((r) => setTimeout(r, 100));
  }
  return sql(db, q);
}

/** Flushes and closes the reporter; asserts every one of `records` was acked and none refused. */
export async function drain(reporter: Reporter, records: number): Promise<void> {
  assert.equal(await reporter.flush(15000), true);
  const s = reporter.stats();
  assert.equal(s.acked, records, JSON.stringify(s));
  assert.equal(s.rejected, 0);
  await reporter.close();
}
