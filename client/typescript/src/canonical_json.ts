// RFC 8785 canonical JSON (JCS), the same rules as the C++ client
// (client/include/cachewatch/client/canonical_json.h) and the shared vectors
// (tests/vectors/canonical_json*.json):
//   - no whitespace; object members sorted by name as UTF-16 code units;
//   - numbers read as IEEE 754 doubles and written as ECMAScript writes them;
//   - strings escaped minimally (JSON.stringify of a well-formed string);
//   - rejected: text that is not JSON (a byte-order mark included), more than
//     1 MiB, nesting deeper than 128, a repeated member name (after
//     unescaping), lone surrogates, numbers that overflow a double.
// JSON.parse is not used: it silently keeps the last of repeated names.

export const MAX_CANONICAL_JSON_BYTES = 1 << 20;
export const MAX_CANONICAL_JSON_DEPTH = 128;

export class CanonicalJsonError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CanonicalJsonError';
  }
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function checkString(s: string, where: string): void {
  if (LONE_SURROGATE.test(s)) {
    throw new CanonicalJsonError(`lone surrogate in ${where}`);
  }
}

function writeString(s: string): string {
  // For a well-formed string JSON.stringify is the RFC 8785 escaping.
  return JSON.stringify(s);
}

function writeNumber(n: number): string {
  if (!Number.isFinite(n)) throw new CanonicalJsonError('number is not finite');
  return String(n);  // -0 gives "0".
}

function compareKeys(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;  // UTF-16 code units, never a locale.
}

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;

class Parser {
  private pos = 0;
  constructor(private readonly text: string) {}

  parseDocument(): string {
    this.skipWhitespace();
    const out = this.parseValue(0);
    this.skipWhitespace();
    if (this.pos !== this.text.length) this.fail('unexpected text after the JSON value');
    return out;
  }

  private fail(what: string): never {
    throw new CanonicalJsonError(`not JSON: ${what} at position ${this.pos}`);
  }

  private skipWhitespace(): void {
    const t = this.text;
    while (this.pos < t.length) {
      const c = t.charCodeAt(this.pos);
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) this.pos++;
      else break;
    }
  }

  private parseValue(depth: number): string {
    const t = this.text;
    if (this.pos >= t.length) this.fail('unexpected end of input');
    const c = t[this.pos];
    switch (c) {
      case '{': return this.parseObject(depth + 1);
      case '[': return this.parseArray(depth + 1);
      case '"': return writeString(this.parseString('string'));
      case 't': return this.literal('true');
      case 'f': return this.literal('false');
      case 'n': return this.literal('null');
      default: return this.parseNumber();
    }
  }

  private literal(word: string): string {
    if (!this.text.startsWith(word, this.pos)) this.fail('unexpected token');
    this.pos += word.length;
    return word;
  }

  private parseNumber(): string {
    NUMBER.lastIndex = this.pos;
    const m = NUMBER.exec(this.text);
    if (m === null) this.fail('unexpected token');
    this.pos += m[0].length;
    return writeNumber(Number(m[0]));
  }

  private checkDepth(depth: number): void {
    if (depth > MAX_CANONICAL_JSON_DEPTH) {
      throw new CanonicalJsonError(`nesting deeper than ${MAX_CANONICAL_JSON_DEPTH}`);
    }
  }

  private parseArray(depth: number): string {
    this.checkDepth(depth);
    this.pos++;  // '['
    const items: string[] = [];
    this.skipWhitespace();
    if (this.text[this.pos] === ']') {
      this.pos++;
      return '[]';
    }
    for (;;) {
      this.skipWhitespace();
      items.push(this.parseValue(depth));
      this.skipWhitespace();
      const c = this.text[this.pos];
      if (c === ',') { this.pos++; continue; }
      if (c === ']') { this.pos++; break; }
      this.fail("expected ',' or ']'");
    }
    return `[${items.join(',')}]`;
  }

  private parseObject(depth: number): string {
    this.checkDepth(depth);
    this.pos++;  // '{'
    const members: Array<[string, string]> = [];
    const names = new Set<string>();
    this.skipWhitespace();
    if (this.text[this.pos] === '}') {
      this.pos++;
      return '{}';
    }
    for (;;) {
      this.skipWhitespace();
      if (this.text[this.pos] !== '"') this.fail('expected a member name');
      const name = this.parseString('member name');
      if (names.has(name)) throw new CanonicalJsonError(`repeated member name ${JSON.stringify(name)}`);
      names.add(name);
      this.skipWhitespace();
      if (this.text[this.pos] !== ':') this.fail("expected ':'");
      this.pos++;
      this.skipWhitespace();
      members.push([name, this.parseValue(depth)]);
      this.skipWhitespace();
      const c = this.text[this.pos];
      if (c === ',') { this.pos++; continue; }
      if (c === '}') { this.pos++; break; }
      this.fail("expected ',' or '}'");
    }
    members.sort((a, b) => compareKeys(a[0], b[0]));
    return `{${members.map(([k, v]) => `${writeString(k)}:${v}`).join(',')}}`;
  }

  // Returns the unescaped string; pos is on the opening quote.
  private parseString(where: string): string {
    const t = this.text;
    this.pos++;
    let out = '';
    let start = this.pos;
    for (;;) {
      if (this.pos >= t.length) this.fail('unterminated string');
      const c = t.charCodeAt(this.pos);
      if (c === 0x22) {
        out += t.slice(start, this.pos);
        this.pos++;
        break;
      }
      if (c < 0x20) this.fail('control character in string');
      if (c !== 0x5c) { this.pos++; continue; }
      out += t.slice(start, this.pos);
      const e = t[this.pos + 1];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          const hex = t.slice(this.pos + 2, this.pos + 6);
          if (!/^[0-9a-fA-F]{4}$/.test(hex)) this.fail('bad \\u escape');
          out += String.fromCharCode(parseInt(hex, 16));
          this.pos += 4;
          break;
        }
        default: this.fail('bad escape');
      }
      this.pos += 2;
      start = this.pos;
    }
    checkString(out, where);
    return out;
  }
}

function canonicalValue(v: unknown, depth: number): string {
  if (v === null) return 'null';
  switch (typeof v) {
    case 'boolean': return v ? 'true' : 'false';
    case 'number': return writeNumber(v);
    case 'string': checkString(v, 'string'); return writeString(v);
    case 'object': break;
    default: throw new CanonicalJsonError(`not a JSON value: ${typeof v}`);
  }
  if (depth + 1 > MAX_CANONICAL_JSON_DEPTH) {
    throw new CanonicalJsonError(`nesting deeper than ${MAX_CANONICAL_JSON_DEPTH}`);
  }
  if (Array.isArray(v)) {
    return `[${v.map((x) => canonicalValue(x, depth + 1)).join(',')}]`;
  }
  const members: Array<[string, string]> = [];
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
    if (x === undefined) continue;  // As JSON.stringify does.
    checkString(k, 'member name');
    members.push([k, canonicalValue(x, depth + 1)]);
  }
  members.sort((a, b) => compareKeys(a[0], b[0]));
  return `{${members.map(([k, x]) => `${writeString(k)}:${x}`).join(',')}}`;
}

function utf8Length(s: string): number {
  return Buffer.byteLength(s, 'utf8');
}

/** Parses a JSON text and returns its RFC 8785 canonical form. */
export function canonicalizeText(text: string): string {
  if (text.length > MAX_CANONICAL_JSON_BYTES || utf8Length(text) > MAX_CANONICAL_JSON_BYTES) {
    throw new CanonicalJsonError(`input larger than ${MAX_CANONICAL_JSON_BYTES} bytes`);
  }
  return new Parser(text).parseDocument();
}

/** Returns the RFC 8785 canonical form of a JS value (objects, arrays, strings, finite numbers, booleans, null). */
export function canonicalizeValue(value: unknown): string {
  const out = canonicalValue(value, 0);
  if (utf8Length(out) > MAX_CANONICAL_JSON_BYTES) {
    throw new CanonicalJsonError(`canonical form larger than ${MAX_CANONICAL_JSON_BYTES} bytes`);
  }
  return out;
}

/**
 * RFC 8785 canonical JSON. A string is read as a JSON text; a Uint8Array as
 * UTF-8 JSON text; anything else as a JS value. Throws CanonicalJsonError.
 */
export function canonicalJson(input: string | Uint8Array | unknown): string {
  if (typeof input === 'string') return canonicalizeText(input);
  if (input instanceof Uint8Array) {
    if (input.length > MAX_CANONICAL_JSON_BYTES) {
      throw new CanonicalJsonError(`input larger than ${MAX_CANONICAL_JSON_BYTES} bytes`);
    }
    let text: string;
    try {
      text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(input);
    } catch {
      throw new CanonicalJsonError('input is not valid UTF-8');
    }
    return canonicalizeText(text);
  }
  return canonicalizeValue(input);
}
