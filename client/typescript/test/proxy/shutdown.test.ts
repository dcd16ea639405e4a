// SIGTERM does not break a request the proxy took (docs/PROXY.md, "Shutdown"):
// a stream the upstream holds across the signal reaches the real
// @anthropic-ai/sdk whole and is stored, while the idle keep-alive
// connections are closed and new connections refused at once; a stream held
// past --shutdown-grace-seconds is cut off, and the daemon still exits 0.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Agent, request as httpRequest } from 'node:http';
import { connect, Socket } from 'node:net';
import Anthropic from '@anthropic-ai/sdk';
import * as daemon from '../support/daemon.js';
import { startProviderServer } from '../support/provider_server.js';
import { ProxyDaemon, startProxyDaemon } from './support.js';

/* eslint-disable @typescript-eslint/no-explicit-any */
const params = (stream: boolean): any => ({
  model: 'claude-sonnet-4-6', max_tokens: 100, system: 'You are the test agent.',
  tools: [{ name: 'shell', description: 'the shell tool', input_schema: { type: 'object', properties: {} } }],
  messages: [{ role: 'user', content: 'hi' }], stream,
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `condition` every 20 ms, failing the test after 10 s. */
async function until(condition: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (await condition()) return;
    await sleep(20);
  }
  assert.fail(`still waiting for ${what}`);
}

/** True when a TCP connection to host:port is refused, false when it is accepted. */
function refused(address: string): Promise<boolean> {
  const url = new URL(address);
  return new Promise((resolve) => {
    const socket = connect(Number(url.port), url.hostname);
    socket.on('connect', () => { socket.destroy(); resolve(false); });
    socket.on('error', (e: any) => resolve(e.code === 'ECONNREFUSED'));
  });
}

/** A JSON messages request on `agent` (keep-alive); resolves with the socket it used, left idle in the agent. */
function jsonRequest(d: ProxyDaemon, agent: Agent, session: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(`${d.proxy}/v1/messages`, {
      method: 'POST', agent, headers: {
        'content-type': 'application/json', 'anthropic-version': '2023-06-01', 'x-api-key': 'sk-ant-secret',
        'x-cachewatch-session': session,
      },
    }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve(req.socket as Socket) : reject(new Error(`${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end(JSON.stringify(params(false)));
  });
}

function stderrOf(d: ProxyDaemon): () => string {
  let text = '';
  d.proc.stderr!.on('data', (chunk: Buffer) => { text += chunk.toString(); });
  return () => text;
}

test('SIGTERM: a stream in flight is relayed whole and stored; idle connections close, new ones are refused',
  async () => {
    const upstream = await startProviderServer();
    const d = await startProxyDaemon([`--proxy-upstream=anthropic=${upstream.url}`, '--shutdown-grace-seconds=30']);
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const idle = await jsonRequest(d, agent, 'drain');
      let idleClosed = false;
      idle.on('close', () => { idleClosed = true; });
      const c = new Anthropic({ apiKey: 'sk-ant-secret', baseURL: d.proxy, maxRetries: 0,
        defaultHeaders: { 'x-cachewatch-session': 'drain' } });
      const stream: any = await c.messages.create(params(true), { headers: { 'x-provider-test': 'pause-after=2' } });
      await until(() => upstream.paused === 1, 'the upstream to hold the stream');
      const exited = new Promise<number | null>((resolve) => d.proc.on('exit', (code) => resolve(code)));

      d.proc.kill('SIGTERM');
      await until(() => idleClosed, 'the idle keep-alive connection to be closed');
      await until(() => refused(d.proxy), 'new connections to be refused');
      assert.equal(upstream.paused, 1, 'the stream is still held');
      assert.equal(d.proc.exitCode, null, 'the daemon waits for the stream');

      upstream.release();
      const seen: string[] = [];
      for await (const e of stream) seen.push(e.type);
      assert.equal(seen[0], 'message_start');
      assert.equal(seen.at(-1), 'message_stop');
      assert.equal(await exited, 0);
      assert.deepEqual(daemon.sql(d.db, `SELECT count(*), sum(usage_received) FROM turns WHERE session_id = 'drain'`),
        ['2|2']);
    } finally {
      agent.destroy();
      d.stop();
      await upstream.close();
    }
  });

test('SIGTERM: a stream still held after --shutdown-grace-seconds is cut off; the daemon exits 0', async () => {
  const upstream = await startProviderServer();
  const d = await startProxyDaemon([`--proxy-upstream=anthropic=${upstream.url}`, '--shutdown-grace-seconds=1']);
  try {
    const log = stderrOf(d);
    const c = new Anthropic({ apiKey: 'sk-ant-secret', baseURL: d.proxy, maxRetries: 0 });
    const stream: any = await c.messages.create(params(true), { headers: { 'x-provider-test': 'pause-after=2' } });
    await until(() => upstream.paused === 1, 'the upstream to hold the stream');
    const exited = new Promise<number | null>((resolve) => d.proc.on('exit', (code) => resolve(code)));
    d.proc.kill('SIGTERM');
    const seen: string[] = [];
    await assert.rejects(async () => {
      for await (const e of stream) seen.push(e.type);
    });
    assert.ok(!seen.includes('message_stop'), `the stream ended: ${seen}`);
    assert.equal(await exited, 0);
    assert.match(log(), /proxy requests still in flight after the grace period/);
  } finally {
    d.stop();
    await upstream.close();
  }
});
