// TLS to the upstream (a throwaway CA made with openssl, trusted with
// --proxy-upstream-ca; untrusted without it) and server-sent events flushed
// one by one: curl -N through the proxy sees each event before the upstream
// sends the next.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { createServer, Server } from 'node:http';
import Anthropic from '@anthropic-ai/sdk';
import { ProviderServer, startProviderServer } from '../support/provider_server.js';
import { makeTestCa, metric, ProxyDaemon, startProxyDaemon, TestCa } from './support.js';

/* eslint-disable @typescript-eslint/no-explicit-any */
let ca: TestCa;
let upstream: ProviderServer;

before(async () => {
  ca = makeTestCa();
  upstream = await startProviderServer({ tls: { key: ca.key, cert: ca.cert } });
});
after(async () => {
  await upstream?.close();
  if (ca) rmSync(ca.dir, { recursive: true, force: true });
});

const params: any = {
  model: 'claude-sonnet-4-6', max_tokens: 100, system: 'You are a test agent.',
  messages: [{ role: 'user', content: 'hi' }],
};

test('https upstream trusted with --proxy-upstream-ca: JSON and stream byte for byte', async () => {
  const d = await startProxyDaemon([`--proxy-upstream=anthropic=${upstream.url}`, `--proxy-upstream-ca=${ca.caFile}`]);
  try {
    const client = new Anthropic({ apiKey: 'sk-ant-secret', baseURL: d.proxy, maxRetries: 0 });
    const json = await (await client.messages.create(params).asResponse()).text();
    assert.equal(json, upstream.requests.at(-1)!.response);
    const sse = await (await client.messages.create({ ...params, stream: true }).asResponse()).text();
    assert.equal(sse, upstream.requests.at(-1)!.response);
    assert.match(sse, /event: message_stop/);
  } finally {
    d.stop();
  }
});

test('https upstream whose CA is not trusted: 502, never forwarded in clear', async () => {
  const d = await startProxyDaemon([`--proxy-upstream=anthropic=${upstream.url}`]);
  const seen = upstream.requests.length;
  try {
    const client = new Anthropic({ apiKey: 'sk-ant-secret', baseURL: d.proxy, maxRetries: 0 });
    await assert.rejects(client.messages.create(params), (e: any) => {
      assert.equal(e.status, 502);
      assert.match(e.error.error.message, /certificate verify failed/);
      return true;
    });
    assert.equal(upstream.requests.length, seen);
    assert.equal(await metric(d, 'cachewatch_proxy_requests_total', 'outcome="upstream_unreachable"'), 1);
  } finally {
    d.stop();
  }
});

test('curl -N sees each server-sent event before the upstream sends the next', { timeout: 20000 }, async () => {
  const events = ['event: one\ndata: {"n":1}\n\n', 'event: two\ndata: {"n":2}\n\n', 'event: three\ndata: {"n":3}\n\n'];
  // The upstream sends event i+1 only once the test saw event i arrive at curl.
  const release: Array<() => void> = [];
  const gates = events.map(() => new Promise<void>((r) => release.push(r)));
  const raw: Server = createServer(async (req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (let i = 0; i < events.length; i++) {
      if (i > 0) await gates[i - 1];
      res.write(events[i]);
    }
    res.end();
  });
  await new Promise<void>((r) => raw.listen(0, '127.0.0.1', r));
  const port = (raw.address() as { port: number }).port;
  const d = await startProxyDaemon([`--proxy-upstream=openai=http://127.0.0.1:${port}`]);
  try {
    const curl = spawn('curl', ['-sN', '-X', 'POST', '--data', '{}', `${d.proxy}/v1/chat/completions`]);
    let out = '';
    const seen: number[] = [];
    await new Promise<void>((resolve, reject) => {
      curl.on('error', reject);
      curl.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        for (let i = seen.length; i < events.length && out.includes(events[i]); i++) {
          seen.push(i);
          release[i]();
        }
      });
      curl.on('close', () => resolve());
    });
    assert.deepEqual(seen, [0, 1, 2]);
    assert.equal(out, events.join(''));
  } finally {
    d.stop();
    raw.closeAllConnections();
    raw.close();
  }
});
