// For the proxy tests: a real cachewatchd with --proxy-listen (its database
// in a temporary directory), its /metrics read back, and a throwaway CA and
// server certificate for 127.0.0.1 made with the openssl command line tool.
import { execFileSync, ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { spawnDaemon } from '../support/daemon.js';

export interface ProxyDaemon {
  /** http://host:port of the proxy. */
  proxy: string;
  /** host:port of /metrics. */
  metrics: string;
  grpc: string;
  db: string;
  dir: string;
  proc: ChildProcess;
  stop(): void;
}

/** Starts cachewatchd with the proxy on a free loopback port and the given flags. */
export async function startProxyDaemon(flags: string[]): Promise<ProxyDaemon> {
  const dir = mkdtempSync(path.join(tmpdir(), 'cachewatch-proxy-'));
  const db = path.join(dir, 'db');
  const s = await spawnDaemon('127.0.0.1:0', db, ['--proxy-listen=127.0.0.1:0', ...flags]);
  return {
    proxy: `http://${s.proxy}`, metrics: s.metrics, grpc: s.grpc, db, dir, proc: s.proc,
    stop: () => {
      if (s.proc.exitCode === null) s.proc.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/* eslint-disable @typescript-eslint/no-explicit-any */
/** An Anthropic tool definition named `name`. */
export const tool = (name: string, properties: any = { arg: { type: 'string' } }): any =>
  ({ name, description: `the ${name} tool`, input_schema: { type: 'object', properties } });

/** Turn `n` of a conversation that opens with `first`: the history grows, as an agent's does. */
export function history(first: string, n: number): any[] {
  const out: any[] = [{ role: 'user', content: first }];
  for (let i = 1; i < n; i++) out.push({ role: 'assistant', content: 'hello' }, { role: 'user', content: `step ${i}` });
  return out;
}
/* eslint-enable @typescript-eslint/no-explicit-any */

/** The value of the series `name{labels}` on /metrics (0 when absent). */
export async function metric(d: ProxyDaemon, name: string, labels: string): Promise<number> {
  const text = await (await fetch(`http://${d.metrics}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && l.includes(labels));
  return line ? Number(line.split(' ').pop()) : 0;
}

/** Polls `metric` until it reaches `want` (5 s at most); returns the last value. */
export async function waitForMetric(d: ProxyDaemon, name: string, labels: string, want: number): Promise<number> {
  let got = 0;
  for (let i = 0; i < 50; i++) {
    got = await metric(d, name, labels);
    if (got >= want) return got;
    await new Promise((r) => setTimeout(r, 100));
  }
  return got;
}

export interface TestCa {
  /** PEM file of the CA certificate. */
  caFile: string;
  /** PEM key and certificate for 127.0.0.1 signed by the CA. */
  key: string;
  cert: string;
  dir: string;
}

/** A throwaway CA and a server certificate (SAN IP:127.0.0.1, DNS:localhost) it signed. */
export function makeTestCa(): TestCa {
  const dir = mkdtempSync(path.join(tmpdir(), 'cachewatch-ca-'));
  const f = (name: string) => path.join(dir, name);
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  execFileSync('openssl', ['req', '-x509', ...ec, '-keyout', f('ca.key'), '-out', f('ca.pem'), '-days', '1',
    '-subj', '/CN=cachewatch test CA'], { stdio: 'pipe' });
  execFileSync('openssl', ['req', ...ec, '-keyout', f('server.key'), '-out', f('server.csr'),
    '-subj', '/CN=127.0.0.1'], { stdio: 'pipe' });
  writeFileSync(f('san.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n');
  execFileSync('openssl', ['x509', '-req', '-in', f('server.csr'), '-CA', f('ca.pem'), '-CAkey', f('ca.key'),
    '-CAcreateserial', '-out', f('server.pem'), '-days', '1', '-extfile', f('san.ext')], { stdio: 'pipe' });
  return {
    caFile: f('ca.pem'), key: readFileSync(f('server.key'), 'utf8'), cert: readFileSync(f('server.pem'), 'utf8'), dir,
  };
}
