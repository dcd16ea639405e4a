// Driving a real SDK client against a fresh loopback provider server
// (provider_server.ts), and the tool-order tests every wrapped API gets:
//   - tools registered in different orders, sent as registered
//     (applyToolOrder: false): the simulated provider misses and the daemon
//     stores a tools_order_changed break; the instrumented client gets exactly
//     what an uninstrumented one gets and sends byte-identical bodies;
//   - the same with the policy applied: the tools go out sorted, the provider
//     hits, the daemon sees no break; the bodies are byte-identical to those of
//     an uninstrumented client that sorted the tools itself.
// One test per way of calling (`calls`) and per policy, each with its own session.
// Also the pieces the SDK test files share: a client wrapped for a session
// (`instrumented`), and the check that a call whose usage the wrapper cannot
// read still gives the caller what a plain client gives and reports the
// snapshot alone (`expectSnapshotOnly`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { InstrumentOptions, Reporter } from '../../src/index.js';
import * as daemon from './daemon.js';
import { startProviderServer } from './provider_server.js';

/* eslint-disable @typescript-eslint/no-explicit-any */
type Json = any;

/** One way of calling the SDK; resolves with what the caller got, as JSON-comparable values. */
export type Call<C> = (client: C, params: Json) => Promise<unknown>;

export interface Run {
  outputs: unknown[];
  /** The request bodies the server received, verbatim. */
  bodies: string[];
}

/** Makes one call per params with the client `make` builds for a fresh server; checks params are left as given. */
export async function runCalls<C>(make: (url: string) => C, call: Call<C>, params: Json[]): Promise<Run> {
  const server = await startProviderServer();
  try {
    const client = make(server.url);
    const outputs: unknown[] = [];
    for (const p of params) {
      const mine = structuredClone(p);
      outputs.push(await call(client, mine));
      assert.deepEqual(mine, p, 'the params object was changed');
    }
    return { outputs, bodies: server.requests.map((r) => r.body) };
  } finally {
    await server.close();
  }
}

/** Every item of an async iterable, with `for await`. */
export async function collect(stream: AsyncIterable<unknown>): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const item of stream) out.push(item);
  return out;
}

/** A ReadableStream of bytes read to the end, as text. */
export async function readText(stream: ReadableStream<Uint8Array>): Promise<string> {
  return new Response(stream).text();
}

/** One SDK: how to build a plain client and wrap it, and the daemon and agent it reports to and as. */
export interface Sdk<C> {
  daemon: daemon.TestDaemon;
  agent: string;
  /** A real SDK client talking to the server at `url`. */
  client(url: string): C;
  instrument(client: C, reporter: Reporter, opts: InstrumentOptions): C;
}

/** For runCalls: a client for `url` wrapped to report to `reporter` as `sdk.agent`, with these options. */
export function instrumented<C>(sdk: Sdk<C>, reporter: Reporter, opts: Omit<InstrumentOptions, 'agent'>):
  (url: string) => C {
  return (url) => sdk.instrument(sdk.client(url), reporter, { agent: sdk.agent, ...opts });
}

/**
 * Makes one call with `params` by a plain client and by a wrapped one (request id `requestId` in `session`): the
 * caller gets the same from both, and the daemon stores the turn's snapshot and no usage.
 */
export async function expectSnapshotOnly<C>(sdk: Sdk<C>, session: string, requestId: string, call: Call<C>,
  params: Json): Promise<void> {
  const plain = await runCalls((url) => sdk.client(url), call, [params]);
  const reporter = new Reporter({ address: sdk.daemon.address });
  const got = await runCalls(instrumented(sdk, reporter, { sessionId: session, requestId: () => requestId }), call,
    [params]);
  assert.deepEqual(got.outputs, plain.outputs);
  await daemon.drain(reporter, 1);
  assert.deepEqual(daemon.sql(sdk.daemon.db, `SELECT request_id, snapshot_received, usage_received FROM turns
    WHERE session_id = '${session}'`), [`${requestId}|1|0`]);
}

export interface ApiUnderTest<C> extends Sdk<C> {
  /** Test name prefix, e.g. 'anthropic messages'. */
  name: string;
  /** Session id prefix; unique per API in the file. */
  sessionPrefix: string;
  /** The request body of one turn of `session` with these tools. */
  params(session: string, tools: Json[]): Json;
  /** Three tools, in their first registration order. */
  tools: Json[];
  toolName(tool: Json): string;
  calls: Record<string, Call<C>>;
}

function byName<C>(api: ApiUnderTest<C>, tools: Json[]): Json[] {
  return [...tools].sort((a, b) => (api.toolName(a) < api.toolName(b) ? -1 : api.toolName(a) > api.toolName(b) ? 1 : 0));
}

export function toolOrderTests<C>(api: ApiUnderTest<C>): void {
  const [a, b, c] = api.tools;
  const registrations = [[a, b, c], [c, a, b]];
  const policies = (session: string) => daemon.sql(api.daemon.db,
    `SELECT DISTINCT tool_order_policy FROM turns WHERE session_id = '${session}'`);
  Object.entries(api.calls).forEach(([kind, call], i) => {
    const wrapped = (reporter: Reporter, session: string, applyToolOrder: boolean) => {
      let n = 0;
      return instrumented(api, reporter, { sessionId: session, applyToolOrder, requestId: () => `t${n++}` });
    };

    test(`${api.name}, ${kind}: tools sent as registered → tools_order_changed; nothing the SDK sends or returns changes`,
      async () => {
        const session = `${api.sessionPrefix}-${i}-registration`;
        const params = registrations.map((tools) => api.params(session, tools));
        const plain = await runCalls((url) => api.client(url), call, params);
        const reporter = new Reporter({ address: api.daemon.address });
        const got = await runCalls(wrapped(reporter, session, false), call, params);
        assert.deepEqual(got.bodies, plain.bodies);
        assert.deepEqual(got.outputs, plain.outputs);
        await daemon.drain(reporter, 4);
        assert.deepEqual(await daemon.verdicts(api.daemon.db, session, 2),
          ['t0|cold_start|', 't1|break|tools_order_changed']);
        assert.deepEqual(daemon.breaks(api.daemon.db, session), ['tools_order_changed']);
        const [moved] = daemon.sql(api.daemon.db,
          `SELECT reordered_tool_names FROM prompt_cache_breaks WHERE session_id = '${session}'`);
        assert.deepEqual(JSON.parse(moved), [api.toolName(c)]);
        assert.deepEqual(policies(session), ['registration']);
      });

    test(`${api.name}, ${kind}: with the tool-order policy → no break; only the tool order is changed`, async () => {
      const session = `${api.sessionPrefix}-${i}-policy`;
      const sorted = registrations.map((tools) => api.params(session, byName(api, tools)));
      const plain = await runCalls((url) => api.client(url), call, sorted);
      const reporter = new Reporter({ address: api.daemon.address });
      const params = registrations.map((tools) => api.params(session, tools));
      const got = await runCalls(wrapped(reporter, session, true), call, params);
      assert.deepEqual(got.bodies, plain.bodies);
      assert.deepEqual(got.outputs, plain.outputs);
      await daemon.drain(reporter, 4);
      assert.deepEqual(await daemon.verdicts(api.daemon.db, session, 2), ['t0|cold_start|', 't1|ok|']);
      assert.deepEqual(daemon.breaks(api.daemon.db, session), []);
      assert.deepEqual(policies(session), ['lexicographic']);
    });
  });
}
