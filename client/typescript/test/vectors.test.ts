// The shared cross-language vectors (tests/vectors/): every case of every file.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  canonicalJson, canonicalizeValue, CanonicalJsonError, hashBytes, hashJson, MessageChain,
  Tool, ToolOrder, ToolOrderError,
} from '../src/index.js';

// dist/test/ → repository root.
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..');
const VECTORS = path.join(ROOT, 'tests', 'vectors');
function load<T>(name: string): T {
  return JSON.parse(readFileSync(path.join(VECTORS, name), 'utf8')) as T;
}

interface CanonicalCase { name: string; input: string; canonical: string; xxh3_64: string }
const canonicalCases = load<CanonicalCase[]>('canonical_json.json');

test('canonical_json.json: every case canonicalizes and hashes as expected', async (t) => {
  assert.ok(canonicalCases.length >= 70);
  for (const c of canonicalCases) {
    await t.test(c.name, () => {
      assert.equal(canonicalJson(c.input), c.canonical);
      assert.equal(hashBytes(c.canonical), c.xxh3_64);
      assert.equal(hashJson(c.input), c.xxh3_64);
      // As UTF-8 bytes, and as a JS value, the same result.
      assert.equal(canonicalJson(new TextEncoder().encode(c.input)), c.canonical);
      assert.equal(canonicalizeValue(JSON.parse(c.input) as unknown), c.canonical);
      // Canonical is a fixed point.
      assert.equal(canonicalJson(c.canonical), c.canonical);
    });
  }
});

interface ErrorCase { name: string; input: string; reason: string }
const errorCases = load<ErrorCase[]>('canonical_json_errors.json');

test('canonical_json_errors.json: every input is rejected', async (t) => {
  assert.ok(errorCases.length >= 30);
  for (const c of errorCases) {
    await t.test(c.name, () => {
      assert.throws(() => canonicalJson(c.input), CanonicalJsonError);
      assert.throws(() => hashJson(c.input), CanonicalJsonError);
    });
  }
});

test('canonical JSON limits: 1 MiB, depth 128, values', () => {
  const big = `"${'a'.repeat((1 << 20) - 2)}"`;
  assert.equal(canonicalJson(big).length, 1 << 20);
  assert.throws(() => canonicalJson(`"${'a'.repeat(1 << 20)}"`), CanonicalJsonError);
  assert.equal(canonicalJson('['.repeat(128) + ']'.repeat(128)), '['.repeat(128) + ']'.repeat(128));
  assert.throws(() => canonicalJson('['.repeat(129) + ']'.repeat(129)), CanonicalJsonError);
  let deep: unknown = [];
  for (let i = 0; i < 128; i++) deep = [deep];
  assert.throws(() => canonicalJson(deep), CanonicalJsonError);
  assert.throws(() => canonicalJson({ a: '\ud800' }), CanonicalJsonError);
  assert.throws(() => canonicalJson({ '\udc00': 1 }), CanonicalJsonError);
  assert.throws(() => canonicalJson([Infinity]), CanonicalJsonError);
  assert.throws(() => canonicalJson(new Uint8Array([0x22, 0xff, 0x22])), CanonicalJsonError);
  assert.equal(canonicalJson({ b: 1, a: undefined, c: [-0, 1e21] }), '{"b":1,"c":[0,1e+21]}');
});

interface ChainFile { blocks: string[]; canonical: string[]; chain: string[] }

test('message_chain.json: the running hashes, all at once and incrementally', () => {
  const v = load<ChainFile>('message_chain.json');
  assert.equal(v.blocks.length, v.chain.length);
  v.blocks.forEach((b, i) => assert.equal(canonicalJson(b), v.canonical[i], `block ${i}`));
  const one = new MessageChain();
  v.blocks.forEach((b, i) => assert.equal(one.append(b), v.chain[i], `block ${i}`));
  assert.deepEqual(one.hashes(), v.chain);

  const inc = new MessageChain();
  assert.deepEqual(inc.update(v.blocks.slice(0, 5)), v.chain.slice(0, 5));
  assert.equal(inc.canonicalized, 5);
  assert.deepEqual(inc.update(v.blocks), v.chain);
  assert.equal(inc.canonicalized, v.blocks.length);  // Only the new ones.
  // A changed early block re-chains from there.
  const changed = v.blocks.slice();
  changed[1] = '{"x":1}';
  const h = inc.update(changed);
  assert.equal(h[0], v.chain[0]);
  assert.notEqual(h[1], v.chain[1]);
  // A bad block changes nothing.
  assert.throws(() => inc.update([...changed, '{"a":1,"a":2}']), CanonicalJsonError);
  assert.deepEqual(inc.hashes(), h);
});

interface VectorTool {
  name: string; display_name?: string; should_defer?: boolean; always_load?: boolean; revealed?: boolean;
}
interface OrderCase {
  name: string;
  tools: VectorTool[];
  tool_order?: string[];
  include_deferred?: boolean;
  expected?: string[];
  expected_display_names?: string[];
  error?: string;
  offending?: string;
}

test('tool_order.json: every order and every error', async (t) => {
  const cases = load<OrderCase[]>('tool_order.json');
  assert.ok(cases.length >= 35);
  for (const c of cases) {
    await t.test(c.name, () => {
      const tools: Tool[] = c.tools.map((x) => ({
        name: x.name,
        displayName: x.display_name ?? '',
        shouldDefer: !!x.should_defer,
        alwaysLoad: !!x.always_load,
        revealed: !!x.revealed,
      }));
      const run = () => {
        const policy = c.tool_order === undefined
          ? ToolOrder.lexicographic() : ToolOrder.explicit(c.tool_order);
        return policy.order(tools, { includeDeferred: !!c.include_deferred });
      };
      if (c.error !== undefined) {
        assert.throws(run, (e: unknown) => {
          assert.ok(e instanceof ToolOrderError, String(e));
          assert.equal(e.kind, c.error);
          assert.equal(e.offending, c.offending);
          assert.ok(e.message.includes(c.offending!), e.message);
          return true;
        });
        return;
      }
      const got = run();
      assert.deepEqual(got.map((x) => x.name), c.expected);
      if (c.expected_display_names) {
        assert.deepEqual(got.map((x) => x.displayName), c.expected_display_names);
      }
    });
  }
});
