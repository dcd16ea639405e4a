// The message chain (tests/vectors/message_chain.json):
//   chain[i] = XXH3-64(LE64(chain[i-1]) || canonical(block[i])), chain[-1] = 0
import { canonicalJson } from './canonical_json.js';
import { hashBytes, le64 } from './hash.js';

const encoder = new TextEncoder();

/** The running hash after `previous` of one more block. */
export function chainNext(previous: string, block: string | unknown): string {
  const canonical = encoder.encode(canonicalJson(block));
  const buf = new Uint8Array(8 + canonical.length);
  buf.set(le64(previous), 0);
  buf.set(canonical, 8);
  return hashBytes(buf);
}

/**
 * Incremental: append() canonicalizes and hashes only the new block.
 * update(blocks) reuses the longest prefix of blocks (by the hash of their
 * text) already seen and chains only what follows.
 */
export class MessageChain {
  private chain: string[] = [];
  private textHashes: string[] = [];
  /** Blocks canonicalized since the chain was made. */
  canonicalized = 0;

  /** Appends one block (a JSON text or value); returns its running hash. */
  append(block: string | unknown): string {
    const prev = this.chain.length ? this.chain[this.chain.length - 1] : '0000000000000000';
    const h = chainNext(prev, block);
    this.canonicalized++;
    this.chain.push(h);
    this.textHashes.push(typeof block === 'string' ? hashBytes(block) : '');
    return h;
  }

  /** Makes the chain that of `blocks`; throws (and changes nothing) on a bad block. */
  update(blocks: ReadonlyArray<string | unknown>): string[] {
    const textHashes = blocks.map((b) => (typeof b === 'string' ? hashBytes(b) : ''));
    let keep = 0;
    while (keep < blocks.length && keep < this.chain.length &&
           textHashes[keep] !== '' && textHashes[keep] === this.textHashes[keep]) {
      keep++;
    }
    const chain = this.chain.slice(0, keep);
    let count = 0;
    for (let i = keep; i < blocks.length; i++) {
      chain.push(chainNext(i ? chain[i - 1] : '0000000000000000', blocks[i]));
      count++;
    }
    this.chain = chain;
    this.textHashes = textHashes;
    this.canonicalized += count;
    return this.hashes();
  }

  hashes(): string[] {
    return this.chain.slice();
  }

  get length(): number {
    return this.chain.length;
  }

  clear(): void {
    this.chain = [];
    this.textHashes = [];
  }
}
