// XXH3-64 (seed 0) via hash-wasm, as 16 lowercase hex digits of the 64-bit
// value (the form of xxhsum -H3 and the shared vectors).
import { createXXHash3 } from 'hash-wasm';
import { canonicalJson } from './canonical_json.js';

// Top-level await: the WebAssembly module is ready once this module is
// imported, so every hash below is synchronous.
const hasher = await createXXHash3(0, 0);
const encoder = new TextEncoder();

/** XXH3-64 of the bytes (a string is hashed as UTF-8). */
export function hashBytes(data: Uint8Array | string): string {
  hasher.init();
  hasher.update(typeof data === 'string' ? encoder.encode(data) : data);
  return hasher.digest('hex');
}

/** XXH3-64 of the RFC 8785 canonical form of a JSON text or JS value. */
export function hashJson(input: string | unknown): string {
  return hashBytes(canonicalJson(input));
}

/** The 8 bytes of a hex hash, least significant first. */
export function le64(hexHash: string): Uint8Array {
  let v = BigInt('0x' + hexHash);
  const out = new Uint8Array(8);
  for (let i = 0; i < 8; i++) {
    out[i] = Number(v & 0xffn);
    v >>= 8n;
  }
  return out;
}

/** A hex hash as the decimal string proto-loader uses for fixed64. */
export function hashToFixed64(hexHash: string): string {
  return BigInt('0x' + hexHash).toString();
}

/** A fixed64 (decimal string, number, bigint) as a 16-digit hex hash. */
export function fixed64ToHash(value: string | number | bigint): string {
  return BigInt(value).toString(16).padStart(16, '0');
}
