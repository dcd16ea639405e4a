import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  fixed64ToHash, hashBytes, hashJson, loadPackageDefinition, SnapshotBuilder,
  SnapshotBuilderError, Tool, ToolOrder, ToolOrderError,
} from '../src/index.js';

const readFile = '{"name":"read_file","input_schema":{"type":"object","properties":{"path":{"type":"string"}}}}';
const shell = '{ "input_schema": {"type":"object"}, "name": "shell" }';
const tools: Tool[] = [
  { name: 'shell', definition: shell },
  { name: 'read_file', definition: readFile },
  { name: 'search', definition: { name: 'search' }, shouldDefer: true },
];

test('SnapshotBuilder: ordered tools, hashes, memoized schemas, incremental chain', () => {
  const b = new SnapshotBuilder({ agent: 'a', sessionId: 's' });
  const s1 = b.build({
    requestId: 'r1', provider: 'PROVIDER_ANTHROPIC', model: 'm', systemPrompt: 'You are helpful.',
    systemSections: [{ name: 'date', text: '2026-11-30' }],
    tools, messageBlocks: ['{"type":"text","text":"hi"}'], options: { thinking: { budget_tokens: 10 } },
    time: new Date(1700000000123),
  });
  assert.deepEqual(s1.tools!.map((t) => t.name), ['read_file', 'shell']);
  assert.equal(fixed64ToHash(s1.tools![0].schema_hash), hashJson(readFile));
  assert.equal(fixed64ToHash(s1.tools![1].schema_hash), hashJson(shell));
  assert.equal(fixed64ToHash(s1.system_hash), hashBytes('You are helpful.'));
  assert.equal(fixed64ToHash(s1.system_sections![0].hash), hashBytes('2026-11-30'));
  assert.equal(fixed64ToHash(s1.options_hash!), hashJson('{"thinking":{"budget_tokens":10}}'));
  assert.deepEqual(s1.request_time, { seconds: 1700000000, nanos: 123000000 });
  assert.equal(s1.tool_order_policy, 'TOOL_ORDER_POLICY_LEXICOGRAPHIC');
  assert.equal(b.stats.toolDefinitionsCanonicalized, 2);
  assert.equal(b.stats.messageBlocksCanonicalized, 1);

  const s2 = b.build({
    requestId: 'r2', provider: 'PROVIDER_ANTHROPIC', model: 'm',
    tools: [...tools].reverse(), messageBlocks: ['{"type":"text","text":"hi"}', '{"type":"text","text":"more"}'],
  });
  assert.deepEqual(s2.tools, s1.tools);
  assert.equal(b.stats.toolDefinitionsCanonicalized, 2);  // Memoized.
  assert.equal(b.stats.messageBlocksCanonicalized, 2);    // Only the new block.
  assert.equal(s2.message_chain![0], s1.message_chain![0]);
  assert.equal(s2.options_hash, '0');
});

test('SnapshotBuilder: errors name the culprit and change nothing', () => {
  const b = new SnapshotBuilder({
    agent: 'a', sessionId: 's', toolOrder: ToolOrder.explicit(['shell', '<unlisted-tools>']),
  });
  const ok = b.build({ requestId: 'r', provider: 'PROVIDER_ANTHROPIC', model: 'm', tools });
  assert.deepEqual(ok.tools!.map((t) => t.name), ['shell', 'read_file']);
  assert.equal(ok.tool_order_policy, 'TOOL_ORDER_POLICY_EXPLICIT');
  assert.throws(() => b.build({ requestId: 'r', provider: 'PROVIDER_ANTHROPIC', model: 'm',
    tools: [{ name: 'bad', definition: '{"a":1,"a":2}' }, { name: 'shell' }] }), /bad/);
  assert.throws(() => b.build({ requestId: 'r', provider: 'PROVIDER_ANTHROPIC', model: 'm',
    tools: [{ name: 'x' }] }), (e: unknown) => e instanceof SnapshotBuilderError && /shell/.test(e.message));
  assert.throws(() => b.build({ requestId: '', provider: 'PROVIDER_ANTHROPIC', model: 'm' }), SnapshotBuilderError);
  assert.throws(() => new SnapshotBuilder({ agent: '', sessionId: 's' }), SnapshotBuilderError);
  assert.equal(b.stats.toolDefinitionsCanonicalized, 2);
});

test('tool order policy errors', () => {
  const err = (f: () => unknown, kind: string, offending: string) =>
    assert.throws(f, (e: unknown) => e instanceof ToolOrderError && e.kind === kind &&
      e.offending === offending && e.message.includes(offending));
  err(() => ToolOrder.explicit([]), 'missing_rest_entry', '<unlisted-tools>');
  err(() => ToolOrder.explicit(['a']), 'missing_rest_entry', '<unlisted-tools>');
  err(() => ToolOrder.explicit(['<unlisted-tools>', '<unlisted-tools>']), 'multiple_rest_entries', '<unlisted-tools>');
  err(() => ToolOrder.explicit(['a', '<unlisted-tools>', 'a']), 'duplicate_entry', 'a');
  err(() => ToolOrder.explicit(['nope', '<unlisted-tools>']).apply([{ name: 'a' }]), 'unknown_entry', 'nope');
  err(() => ToolOrder.lexicographic().apply([{ name: '<unlisted-tools>', shouldDefer: true }]),
    'reserved_tool_name', '<unlisted-tools>');
  // A hidden deferred tool may be listed; it takes no position.
  assert.deepEqual(ToolOrder.explicit(['h', '<unlisted-tools>'])
    .order([{ name: 'b' }, { name: 'h', shouldDefer: true }, { name: 'a' }]).map((t) => t.name), ['a', 'b']);
  // Code units, not locale.
  assert.deepEqual(ToolOrder.lexicographic().order([{ name: 'b' }, { name: 'ä' }, { name: 'B' }, { name: 'a' }])
    .map((t) => t.name), ['B', 'a', 'b', 'ä']);
});

test('a Snapshot survives the wire: fixed64 as decimal strings, enums as names', () => {
  const def = loadPackageDefinition();
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const record = (def['cachewatch.v1.CacheWatch'] as any).Record;
  const b = new SnapshotBuilder({ agent: 'a', sessionId: 's', lane: 'main' });
  const snap = b.build({ requestId: 'r', provider: 'PROVIDER_OPENAI', model: 'm', tools,
    messageBlocks: ['{}', '[]'] });
  snap.tools!.push({ name: 'max', schema_hash: '18446744073709551615' });
  const bytes: Buffer = record.requestSerialize({ snapshot: snap });
  const back = record.requestDeserialize(bytes);
  assert.equal(back.record, 'snapshot');
  assert.deepEqual(back.snapshot.tools, snap.tools);
  assert.deepEqual(back.snapshot.message_chain, snap.message_chain);
  assert.equal(back.snapshot.system_hash, snap.system_hash);
  assert.equal(back.snapshot.provider, 'PROVIDER_OPENAI');
  assert.equal(fixed64ToHash(back.snapshot.tools[2].schema_hash), 'ffffffffffffffff');
});
