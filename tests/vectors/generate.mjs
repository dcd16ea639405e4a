#!/usr/bin/env node
// Regenerates the shared client test vectors in this folder:
//
//   canonical_json.json         JSON text -> RFC 8785 canonical form + XXH3-64
//   canonical_json_errors.json  JSON texts every client must reject
//   message_chain.json          content blocks -> running chain hashes
//   tool_order.json             tool lists + policy -> order or error
//
// Every client (C++ in client/, the languages that follow) must reproduce
// these files exactly. The expected values are derived here independently of
// any client: canonical forms from JavaScript itself (JSON.stringify gives the
// ECMAScript number form and the RFC 8785 string escaping, Array.prototype.sort
// compares UTF-16 code units), hashes from the `xxhsum -H3` command (Debian
// package `xxhash`), tool orders from a direct transcription of the policy.
//
// Usage: node tests/vectors/generate.mjs   (Node.js 20+, xxhsum on PATH)
// Nothing in the build runs this script.

import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url));
const MAX_BYTES = 1 << 20;
const MAX_DEPTH = 128;
const REST = '<unlisted-tools>';

class Rejected extends Error {}

// ---------------------------------------------------------------- hashing --

// XXH3-64 (seed 0) of `bytes` as 16 lowercase hex digits, from xxhsum, which
// prints e.g. "XXH3 (stdin) = 2d06800538d394c2".
function xxh3(bytes) {
  const out = execFileSync('xxhsum', ['-H3'], { input: bytes }).toString();
  const match = /= ([0-9a-f]{16})\s*$/.exec(out);
  if (!match) throw new Error(`unexpected xxhsum output: ${out}`);
  return match[1];
}

// Published XXH3-64 values, so a changed xxhsum output format cannot pass.
assertEqual(xxh3(Buffer.alloc(0)), '2d06800538d394c2', 'XXH3 of ""');
assertEqual(xxh3(Buffer.from('abc')), '78af5f94892f3950', 'XXH3 of "abc"');

// ---------------------------------------------------------- canonical JSON --

// The first repeated member name of an object in the (valid) JSON text, or
// undefined. JSON.parse keeps the last silently; RFC 8785 (I-JSON) forbids
// repeats.
function repeatedName(text) {
  const open = [];  // A Set of names per open object, null per open array.
  for (let i = 0; i < text.length; ) {
    const c = text[i];
    if (c === '"') {
      let j = i + 1;
      while (text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      const token = text.slice(i, j + 1);
      i = j + 1;
      let k = i;
      while (' \t\n\r'.includes(text[k] ?? 'x')) k++;
      if (text[k] === ':') {
        const name = JSON.parse(token);
        const names = open[open.length - 1];
        if (names.has(name)) return name;
        names.add(name);
      }
      continue;
    }
    if (c === '{') open.push(new Set());
    if (c === '[') open.push(null);
    if (c === '}' || c === ']') open.pop();
    i++;
  }
  return undefined;
}

function canonicalValue(value, depth) {
  if (value === null || typeof value === 'boolean') return JSON.stringify(value);
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new Rejected('number is not finite');
    return JSON.stringify(value);
  }
  if (typeof value === 'string') {
    if (!value.isWellFormed()) throw new Rejected('lone surrogate');
    return JSON.stringify(value);
  }
  if (depth >= MAX_DEPTH) throw new Rejected(`deeper than ${MAX_DEPTH}`);
  if (Array.isArray(value)) {
    return `[${value.map((v) => canonicalValue(v, depth + 1)).join(',')}]`;
  }
  const names = Object.keys(value).sort();  // UTF-16 code-unit order.
  return `{${names
    .map((name) => `${canonicalValue(name, depth)}:${canonicalValue(value[name], depth + 1)}`)
    .join(',')}}`;
}

function canonicalize(text) {
  if (Buffer.byteLength(text, 'utf8') > MAX_BYTES) throw new Rejected('too large');
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new Rejected(`not JSON: ${e.message}`);
  }
  const repeated = repeatedName(text);
  if (repeated !== undefined) throw new Rejected(`repeated name ${repeated}`);
  return canonicalValue(value, 0);
}

const nested = (depth, leaf) => '['.repeat(depth) + leaf + ']'.repeat(depth);
const nestedObjects = (depth) => '{"a":'.repeat(depth - 1) + '{}' + '}'.repeat(depth - 1);
const pretty = (value) => JSON.stringify(value, null, 2);

// Realistic tool definitions, written with their keys in natural (unsorted)
// order and pretty-printed, as an agent would hold them.
const TOOLS = {
  anthropic_read_file: {
    name: 'read_file',
    description: 'Read a file from the workspace. Returns at most `limit` lines starting at `offset`.',
    input_schema: {
      type: 'object',
      properties: {
        path: { type: 'string', description: 'Absolute path of the file.' },
        offset: { type: 'integer', minimum: 0, default: 0 },
        limit: { type: 'integer', minimum: 1, maximum: 2000, default: 2000 },
      },
      required: ['path'],
      additionalProperties: false,
    },
  },
  anthropic_shell: {
    name: 'shell',
    description: 'Run a command in a POSIX shell.\nOutput over 30000 characters is cut.',
    input_schema: {
      type: 'object',
      properties: {
        command: { type: 'string' },
        timeout_ms: { type: 'number', exclusiveMinimum: 0, maximum: 600000.0 },
        run_in_background: { type: 'boolean' },
      },
      required: ['command'],
    },
    cache_control: { type: 'ephemeral', ttl: '1h' },
  },
  mcp_github_search_issues: {
    name: 'mcp__github__search_issues',
    description: 'Search issues and pull requests — supports “qualifiers” like is:open, label:bug 🐛.',
    input_schema: {
      type: 'object',
      properties: {
        query: { type: 'string', minLength: 1 },
        sort: { type: 'string', enum: ['comments', 'reactions', 'created', 'updated'] },
        order: { type: 'string', enum: ['asc', 'desc'], default: 'desc' },
        per_page: { type: 'integer', minimum: 1, maximum: 100, default: 30 },
        page: { type: 'integer', minimum: 1 },
      },
      required: ['query'],
      $schema: 'http://json-schema.org/draft-07/schema#',
    },
  },
  openai_function: {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Wetter für einen Ort abfragen (°C).',
      strict: true,
      parameters: {
        type: 'object',
        properties: {
          location: { type: 'string', description: 'Stadt, z. B. "Zürich"' },
          unit: { type: ['string', 'null'], enum: ['celsius', 'fahrenheit', null] },
        },
        required: ['location', 'unit'],
        additionalProperties: false,
      },
    },
  },
  gemini_function_declaration: {
    name: 'mcp__filesystem__read_tree',
    description: '列出目录树（最多 depth 层）',
    parameters: {
      type: 'OBJECT',
      properties: {
        root: { type: 'STRING' },
        depth: { type: 'INTEGER', minimum: 1, maximum: 10 },
        exclude: { type: 'ARRAY', items: { type: 'STRING' } },
      },
      required: ['root'],
    },
  },
};

// RFC 8785 Appendix B: IEEE 754 bit patterns and their ECMAScript form.
const RFC8785_NUMBERS = [
  ['0000000000000000', '0'],
  ['8000000000000000', '0'],
  ['0000000000000001', '5e-324'],
  ['8000000000000001', '-5e-324'],
  ['7fefffffffffffff', '1.7976931348623157e+308'],
  ['ffefffffffffffff', '-1.7976931348623157e+308'],
  ['4340000000000000', '9007199254740992'],
  ['c340000000000000', '-9007199254740992'],
  ['4430000000000000', '295147905179352830000'],
  ['44b52d02c7e14af5', '9.999999999999997e+22'],
  ['44b52d02c7e14af6', '1e+23'],
  ['44b52d02c7e14af7', '1.0000000000000001e+23'],
  ['444b1ae4d6e2ef4e', '999999999999999700000'],
  ['444b1ae4d6e2ef4f', '999999999999999900000'],
  ['444b1ae4d6e2ef50', '1e+21'],
  ['3eb0c6f7a0b5ed8c', '9.999999999999997e-7'],
  ['3eb0c6f7a0b5ed8d', '0.000001'],
  ['41b3de4355555553', '333333333.3333332'],
  ['41b3de4355555554', '333333333.33333325'],
  ['41b3de4355555555', '333333333.3333333'],
  ['41b3de4355555556', '333333333.3333334'],
  ['41b3de4355555557', '333333333.33333343'],
  ['becbf647612f3696', '-0.0000033333333333333333'],
  ['43143ff3c1cb0959', '1424953923781206.2'],
];

function doubleFromBits(hex) {
  const buffer = Buffer.from(hex, 'hex');
  return buffer.readDoubleBE(0);
}

// [name, input text, canonical form where the vector pins it by hand].
const CANONICAL = [
  ['empty_object', '{}'],
  ['empty_array', '[]'],
  ['empty_string', '""'],
  ['literals', '[null,true,false]'],
  ['top_level_string', '"hello"'],
  ['top_level_number', '42'],
  ['whitespace_removed', ' \t\n\r{ "b" : [ 1 , 2 ] ,\n  "a" : { } }\n '],
  ['keys_ascii_order', '{"b":1,"a":2,"B":3,"aa":4,"":5,"a b":6,"_":7,"1":8,"10":9,"9":10}'],
  // U+E000 is EE 80 80 in UTF-8 and U+1F600 is F0 9F 98 80: byte order puts
  // U+E000 first, UTF-16 code units (E000 vs D83D DE00) put U+1F600 first.
  ['keys_utf16_not_utf8_escaped', '{"\\ue000":"U+E000","\\ud83d\\ude00":"U+1F600"}',
    '{"\u{1F600}":"U+1F600","\uE000":"U+E000"}'],
  ['keys_utf16_not_utf8_raw', '{"\uE000x":1,"\u{1F600}x":2,"\uFFFF":3,"\u{10000}":4,"\uD7FF":5}'],
  ['keys_rfc8785_sorting',
    '{"\\u20ac":"Euro Sign","\\r":"Carriage Return","\\ufb33":"Hebrew Letter Dalet With Dagesh",' +
      '"1":"One","\\ud83d\\ude00":"Emoji: Grinning Face","\\u0080":"Control",' +
      '"\\u00f6":"Latin Small Letter O With Diaeresis"}',
    '{"\\r":"Carriage Return","1":"One","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis",' +
      '"\u20ac":"Euro Sign","\u{1F600}":"Emoji: Grinning Face","\uFB33":"Hebrew Letter Dalet With Dagesh"}'],
  ['keys_escaped', '{"a\\nb":1,"a\\"b":2,"a\\\\b":3,"a\\u0000b":4}'],
  ['nested_objects', '{"z":{"y":{"x":[3,{"c":1,"b":2,"a":3}]}},"a":[]}'],
  ['nested_arrays', '[[],[[]],{},[{}],[1,[2,[3]]]]'],
  ['array_order_kept', '[3,1,2,"b","a",{"b":1,"a":2}]'],
  ['depth_128_arrays', nested(128, '')],
  ['depth_128_objects', nestedObjects(128)],
  ['number_zero', '0', '0'],
  ['number_negative_zero', '-0', '0'],
  ['number_negative_zero_float', '-0.0', '0'],
  ['number_one_point_zero', '1.0', '1'],
  ['number_1e21', '1e21', '1e+21'],
  ['number_1e20', '1e20', '100000000000000000000'],
  ['number_1e-7', '1e-7', '1e-7'],
  ['number_1e-6', '0.000001', '0.000001'],
  ['number_big_integer', '123456789012345678901', '123456789012345680000'],
  ['number_0.1', '0.1', '0.1'],
  ['number_min_subnormal', '5e-324', '5e-324'],
  ['number_max_double', '1.7976931348623157e308', '1.7976931348623157e+308'],
  ['number_2_pow_53_plus_1', '9007199254740993', '9007199254740992'],
  ['number_uint64_max', '18446744073709551615', '18446744073709552000'],
  ['number_int64_min', '-9223372036854775808', '-9223372036854776000'],
  ['number_underflow', '[1e-400,-1e-400]', '[0,0]'],
  ['number_forms', '[1E2,1e+2,1.5e-3,-2.5E+10,0.0,100e-2,-1.25e-7,123.456e5,4.50]',
    '[100,100,0.0015,-25000000000,0,1,-1.25e-7,12345600,4.5]'],
  ['string_escapes', '"\\"\\\\\\/\\b\\f\\n\\r\\t"', '"\\"\\\\/\\b\\f\\n\\r\\t"'],
  ['string_controls', '"\\u0000\\u0001\\u001F\\u001f\\u007f \\u0020"', '"\\u0000\\u0001\\u001f\\u001f\u007f  "'],
  ['string_unicode_escapes', '"\\u00e9\\u20AC\\ud83d\\ude00\\uffff"', '"\u00e9\u20ac\u{1F600}\uffff"'],
  ['string_unicode_raw', '"日本語 Ελληνικά Ümlaut 😀"', '"日本語 Ελληνικά Ümlaut 😀"'],
  ['string_line_separators', '"\\u2028\\u2029"', '"\u2028\u2029"'],
  ['rfc8785_example',
    '{\n  "numbers": [333333333.33333329, 1E30, 4.50,\n              2e-3, 0.000000000000000000000000001],\n' +
      '  "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",\n' +
      '  "literals": [null, true, false]\n}',
    '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],' +
      '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'],
  ...Object.entries(TOOLS).map(([name, tool]) => [`tool_${name}`, pretty(tool)]),
  ['request_options',
    '{"tool_choice":{"type":"auto"},"thinking":{"type":"enabled","budget_tokens":8000},' +
      '"betas":["context-1m-2025-08-07"],"max_tokens":32000}'],
  ...RFC8785_NUMBERS.map(([bits, expected]) => {
    const x = doubleFromBits(bits);
    const input = x === 0 ? (Object.is(x, -0) ? '-0.0' : '0.0') : x.toPrecision(17);
    return [`number_ieee_${bits}`, input, expected];
  }),
];

const ERRORS = [
  ['empty_text', ''],
  ['whitespace_only', ' \n'],
  ['trailing_comma_array', '[1,]'],
  ['trailing_comma_object', '{"a":1,}'],
  ['single_quotes', "{'a':1}"],
  ['unquoted_name', '{a:1}'],
  ['leading_zero', '01'],
  ['plus_sign', '+1'],
  ['leading_dot', '.5'],
  ['trailing_dot', '1.'],
  ['nan_literal', 'NaN'],
  ['infinity_literal', 'Infinity'],
  ['hex_number', '0x10'],
  ['trailing_garbage', '{} x'],
  ['two_values', '1 2'],
  ['comment', '/* c */ 1'],
  ['raw_control_in_string', '"a\tb"'],
  ['invalid_escape', '"\\x41"'],
  ['unclosed_array', '[1,2'],
  ['unterminated_string', '"abc'],
  ['byte_order_mark', '\uFEFF{}'],
  ['number_overflow', '1e400'],
  ['number_overflow_negative', '[-1e400]'],
  ['lone_high_surrogate', '"\\ud800"'],
  ['lone_low_surrogate', '"\\udc00"'],
  ['reversed_surrogates', '"\\udc00\\ud800"'],
  ['lone_surrogate_in_name', '{"\\ud83d":1}'],
  ['repeated_name', '{"a":1,"a":2}'],
  ['repeated_name_nested', '{"x":[{"b":1,"b":1}]}'],
  ['repeated_name_after_unescaping', '{"a":1,"\\u0061":2}'],
  ['too_deep_arrays', nested(129, '')],
  ['too_deep_objects', nestedObjects(129)],
];

function buildCanonical() {
  return CANONICAL.map(([name, input, pinned]) => {
    const canonical = canonicalize(input);
    if (pinned !== undefined) assertEqual(canonical, pinned, name);
    return { name, input, canonical, xxh3_64: xxh3(Buffer.from(canonical, 'utf8')) };
  });
}

function buildErrors() {
  return ERRORS.map(([name, input]) => {
    try {
      canonicalize(input);
    } catch (e) {
      if (e instanceof Rejected) return { name, input, reason: e.message };
      throw e;
    }
    throw new Error(`error vector ${name} was accepted`);
  });
}

// ------------------------------------------------------------ message chain --

const CHAIN_CONTRACT =
  'chain[i] = XXH3-64(LE64(chain[i-1]) || canonical(block[i])), seed 0, chain[-1] = 0; ' +
  'LE64 is the 64-bit hash as 8 bytes, least significant first; canonical is RFC 8785 ' +
  '(canonical_json.json); hashes are 16 lowercase hex digits of the 64-bit value.';

const BLOCKS = [
  '{"role":"user","type":"text","text":"Fix the failing test in src/parser.cc"}',
  pretty({
    role: 'assistant',
    type: 'tool_use',
    id: 'toolu_01A',
    name: 'read_file',
    input: { path: 'src/parser.cc', offset: 0, limit: 2000.0 },
  }),
  pretty({
    role: 'user',
    type: 'tool_result',
    tool_use_id: 'toolu_01A',
    content: 'int Parse(const char* s) {\n\treturn s[0] == \'"\' ? 1 : 0;\n}\n',
  }),
  '{"type":"text","text":"Looks good 👍 — running the tests.","role":"assistant"}',
  '"a bare string block"',
  '{"role":"user","type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}',
  '{"role":"assistant","type":"tool_use","id":"toolu_02","name":"calc","input":{"x":1.0,"y":1e21,"z":-0}}',
  '{"role":"user","type":"text","text":"日本語のテキスト"}',
  '{"role":"user","type":"text","text":"日本語のテキスト"}',
  '{}',
  '[]',
  '{"role":"assistant","type":"text","text":"","citations":null}',
];

function buildChain() {
  let previous = 0n;
  const canonical = [];
  const chain = [];
  for (const block of BLOCKS) {
    const form = canonicalize(block);
    const input = Buffer.alloc(8 + Buffer.byteLength(form, 'utf8'));
    input.writeBigUInt64LE(previous, 0);
    input.write(form, 8, 'utf8');
    const hash = xxh3(input);
    previous = BigInt(`0x${hash}`);
    canonical.push(form);
    chain.push(hash);
  }
  return { contract: CHAIN_CONTRACT, blocks: BLOCKS, canonical, chain };
}

// --------------------------------------------------------------- tool order --

// The policy as the seed documents state it (client/include/cachewatch/
// client/tool_order.h restates it), transcribed directly.
function orderTools({ tools, tool_order: toolOrder, include_deferred: includeDeferred }) {
  if (toolOrder !== undefined) {
    const seen = new Set();
    for (const entry of toolOrder) {
      if (seen.has(entry)) {
        throw { error: entry === REST ? 'multiple_rest_entries' : 'duplicate_entry', offending: entry };
      }
      seen.add(entry);
    }
    if (!seen.has(REST)) throw { error: 'missing_rest_entry', offending: REST };
  }
  for (const tool of tools) {
    if (tool.name === REST) throw { error: 'reserved_tool_name', offending: REST };
  }
  for (const entry of toolOrder ?? []) {
    if (entry !== REST && !tools.some((tool) => tool.name === entry)) {
      throw { error: 'unknown_entry', offending: entry };
    }
  }
  const visible = tools.filter(
    (tool) => includeDeferred || !tool.should_defer || tool.always_load || tool.revealed,
  );
  const position = (name) => {
    if (toolOrder === undefined) return 0;
    const listed = toolOrder.indexOf(name);
    return listed >= 0 ? listed : toolOrder.indexOf(REST);
  };
  const compare = (a, b) => (a < b ? -1 : a > b ? 1 : 0);  // UTF-16 code units.
  return visible.sort(
    (a, b) =>
      position(a.name) - position(b.name) ||
      compare(a.name, b.name) ||
      compare(a.display_name ?? '', b.display_name ?? ''),
  );
}

const named = (...names) => names.map((name) => ({ name }));
const ABCDE = named('c', 'a', 'e', 'b', 'd');

const TOOL_ORDER = [
  // The German seed's test plan (stable-tool-schema-sort...), cases 1-6.
  { name: 'seed_sorted_by_name', tools: named('zeta', 'alpha', 'middle') },
  { name: 'seed_sorted_by_name_other_registration', tools: named('middle', 'zeta', 'alpha') },
  {
    name: 'seed_deferred_filtered_before_sorting',
    tools: [{ name: 'visible-z' }, { name: 'hidden-a', should_defer: true }, { name: 'visible-a' }],
  },
  {
    name: 'seed_include_deferred',
    tools: [{ name: 'visible-z' }, { name: 'hidden-a', should_defer: true }, { name: 'visible-a' }],
    include_deferred: true,
  },
  {
    name: 'seed_revealed_deferred_in_sorted_position',
    tools: [{ name: 'visible-m' }, { name: 'hidden-a', should_defer: true, revealed: true }, { name: 'visible-z' }],
  },
  {
    name: 'seed_always_load_deferred_visible',
    tools: [{ name: 'z', should_defer: true, always_load: true }, { name: 'a' }],
  },
  {
    name: 'seed_mcp_registry_a',
    tools: named('mcp__github__search_issues', 'mcp__filesystem__read_tree'),
  },
  {
    name: 'seed_mcp_registry_b',
    tools: named('mcp__filesystem__read_tree', 'mcp__github__search_issues'),
  },
  {
    name: 'seed_mcp_discovery_run_2',
    tools: named('read_file', 'shell', 'mcp__github__search_issues', 'mcp__filesystem__read_tree'),
  },
  // Code units, not a locale: localeCompare would interleave cases and accents.
  { name: 'code_unit_order_not_locale', tools: named('b', 'B', 'ä', 'a', 'A', '_x', 'Z', 'é', 'e') },
  { name: 'code_unit_utf16_not_utf8', tools: named('\uE000x', '\u{1F600}x', '\uFFFF', 'zz') },
  { name: 'code_unit_prefixes', tools: named('readme', 'read_file', 'read', 'read-file') },
  { name: 'code_unit_digits', tools: named('tool10', 'tool2', 'tool1') },
  {
    name: 'shared_name_display_name_breaks_tie',
    tools: [
      { name: 'search', display_name: 'Web Search' },
      { name: 'alpha', display_name: 'Alpha' },
      { name: 'search', display_name: 'Code Search' },
    ],
  },
  { name: 'no_tools', tools: [] },
  { name: 'all_hidden', tools: [{ name: 'a', should_defer: true }] },
  // The Chinese seed's explicit toolOrder.
  { name: 'explicit_listed_and_rest', tools: ABCDE, tool_order: ['e', REST, 'b'] },
  { name: 'explicit_other_registration_order', tools: named('b', 'd', 'e', 'c', 'a'), tool_order: ['e', REST, 'b'] },
  { name: 'explicit_rest_first', tools: ABCDE, tool_order: [REST, 'a'] },
  { name: 'explicit_rest_only', tools: ABCDE, tool_order: [REST] },
  { name: 'explicit_rest_with_no_unlisted_tools', tools: named('b', 'a'), tool_order: ['b', REST, 'a'] },
  {
    name: 'explicit_listed_hidden_tool_is_known_but_absent',
    tools: [{ name: 'zed' }, { name: 'hidden', should_defer: true }, { name: 'alpha' }],
    tool_order: ['hidden', REST],
  },
  {
    name: 'explicit_listed_revealed_tool_takes_position',
    tools: [{ name: 'zed' }, { name: 'hidden', should_defer: true, revealed: true }, { name: 'alpha' }],
    tool_order: ['hidden', REST],
  },
  {
    name: 'explicit_listed_shared_name',
    tools: [
      { name: 'search', display_name: 'Web Search' },
      { name: 'alpha' },
      { name: 'search', display_name: 'Code Search' },
    ],
    tool_order: ['search', REST],
  },
  // Errors. Shape errors come from the list alone, read in order; then tools
  // named like the rest entry; then listed names no tool has.
  { name: 'error_empty_tool_order', tools: ABCDE, tool_order: [] },
  { name: 'error_no_rest_entry', tools: ABCDE, tool_order: ['a', 'b'] },
  { name: 'error_two_rest_entries', tools: ABCDE, tool_order: [REST, 'a', REST] },
  { name: 'error_two_rest_entries_no_tools', tools: [], tool_order: [REST, REST] },
  { name: 'error_duplicate_entry', tools: ABCDE, tool_order: ['a', REST, 'a'] },
  { name: 'error_duplicate_before_missing_rest', tools: ABCDE, tool_order: ['b', 'b'] },
  { name: 'error_unknown_entry', tools: ABCDE, tool_order: ['a', 'nope', REST] },
  { name: 'error_unknown_entry_case_sensitive', tools: named('Read'), tool_order: ['read', REST] },
  { name: 'error_reserved_tool_name', tools: named('a', REST) },
  {
    name: 'error_reserved_tool_name_hidden',
    tools: [{ name: 'a' }, { name: REST, should_defer: true }],
  },
  { name: 'error_reserved_before_unknown', tools: named('a', REST), tool_order: ['nope', REST] },
];

function buildToolOrder() {
  return TOOL_ORDER.map((testCase) => {
    const out = structuredClone(testCase);
    try {
      const ordered = orderTools(structuredClone(testCase));
      out.expected = ordered.map((tool) => tool.name);
      if (ordered.some((tool) => tool.display_name !== undefined)) {
        out.expected_display_names = ordered.map((tool) => tool.display_name ?? '');
      }
    } catch (e) {
      if (!e.error) throw e;
      Object.assign(out, e);
    }
    return out;
  });
}

// ------------------------------------------------------------------- output --

function assertEqual(actual, expected, what) {
  if (actual !== expected) {
    throw new Error(`${what}: got ${JSON.stringify(actual)}, want ${JSON.stringify(expected)}`);
  }
}

function write(file, value) {
  writeFileSync(join(HERE, file), `${JSON.stringify(value, null, 2)}\n`);
  console.log(`${file}: ${Array.isArray(value) ? value.length : value.blocks.length} entries`);
}

write('canonical_json.json', buildCanonical());
write('canonical_json_errors.json', buildErrors());
write('message_chain.json', buildChain());
write('tool_order.json', buildToolOrder());
