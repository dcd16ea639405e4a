// SnapshotBuilder: what an agent is about to send → the Snapshot it reports
// (C++ client/include/cachewatch/client/snapshot_builder.h). Only names,
// hashes and counts go in. Schema hashes are memoized by the hash of the
// definition's text; the message chain is incremental.
import { canonicalJson } from './canonical_json.js';
import { hashBytes, hashJson, hashToFixed64 } from './hash.js';
import { MessageChain } from './message_chain.js';
import { Tool, ToolOrder } from './tool_order.js';
import {
  CacheControl, ExpectedDrop, Provider, Snapshot, toTimestamp,
} from './types.js';

export interface SnapshotBuilderOptions {
  agent: string;
  sessionId: string;
  lane?: string;
  /** Default: lexicographic. */
  toolOrder?: ToolOrder;
}

export interface ModelRequest {
  requestId: string;
  /** Default: now. */
  time?: Date;
  provider: Provider;
  model: string;
  systemPrompt?: string;
  systemSections?: Array<{ name: string; text: string }>;
  /** Every registered tool, in any order. */
  tools?: readonly Tool[];
  /** Content blocks of the messages, in order (JSON texts or values). */
  messageBlocks?: ReadonlyArray<string | unknown>;
  /** Other cache-keying options as JSON text or value. */
  options?: string | unknown;
  cacheControl?: CacheControl;
  expectedDrop?: ExpectedDrop;
}

/**
 * `control` with each breakpoint's blocks_after filled, where unset, from its
 * segment's length (C++ SnapshotBuilder does the same): 0 for a breakpoint on
 * the segment's last block, which stays "at the end" whatever the length.
 */
function withBlocksAfter(control: CacheControl, lengths: Record<string, number>): CacheControl {
  if (!control.breakpoints?.length) return control;
  return {
    ...control,
    breakpoints: control.breakpoints.map((b) => {
      const length = lengths[b.segment] ?? 0;
      return b.blocks_after !== undefined || b.index >= length ? b : { ...b, blocks_after: length - 1 - b.index };
    }),
  };
}

export class SnapshotBuilderError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'SnapshotBuilderError';
  }
}

const MAX_AGENT_BYTES = 128;
const MAX_SESSION_BYTES = 256;

export class SnapshotBuilder {
  private readonly toolOrder: ToolOrder;
  /** Hash of a definition's text → its schema hash (tools of the last Build). */
  private schemaHashes = new Map<string, string>();
  private readonly chain = new MessageChain();
  readonly stats = { toolDefinitionsCanonicalized: 0, messageBlocksCanonicalized: 0 };

  constructor(private readonly options: SnapshotBuilderOptions) {
    if (!options.agent || Buffer.byteLength(options.agent) > MAX_AGENT_BYTES) {
      throw new SnapshotBuilderError(`agent must be 1..${MAX_AGENT_BYTES} bytes`);
    }
    if (!options.sessionId || Buffer.byteLength(options.sessionId) > MAX_SESSION_BYTES) {
      throw new SnapshotBuilderError(`sessionId must be 1..${MAX_SESSION_BYTES} bytes`);
    }
    this.toolOrder = options.toolOrder ?? ToolOrder.lexicographic();
  }

  /**
   * The tools to send to the provider, in the order the snapshot reports;
   * with includeDeferred, the deferred tools too, in their policy position.
   */
  orderTools<T extends Tool>(tools: readonly T[], opts: { includeDeferred?: boolean } = {}): T[] {
    return this.toolOrder.order(tools, opts);
  }

  /** Builds the snapshot; throws SnapshotBuilderError and changes nothing on bad input. */
  build(req: ModelRequest): Snapshot {
    if (!req.requestId) throw new SnapshotBuilderError('requestId is required');
    if (!req.model) throw new SnapshotBuilderError('model is required');
    if (!req.provider || req.provider === 'PROVIDER_UNSPECIFIED') {
      throw new SnapshotBuilderError('provider is required');
    }
    const tools = req.tools ?? [];
    let ordered: Tool[];
    try {
      ordered = this.toolOrder.order(tools);
    } catch (e) {
      throw new SnapshotBuilderError(`tool order: ${(e as Error).message}`, { cause: e });
    }
    const newSchemaHashes = new Map<string, string>();
    let canonicalized = 0;
    const toolRefs = ordered.map((t) => {
      const def = t.definition ?? { name: t.name };
      let schema: string;
      try {
        if (typeof def === 'string') {
          const key = hashBytes(def);
          const known = newSchemaHashes.get(key) ?? this.schemaHashes.get(key);
          if (known !== undefined) {
            schema = known;
          } else {
            schema = hashBytes(canonicalJson(def));
            canonicalized++;
          }
          newSchemaHashes.set(key, schema);
        } else {
          schema = hashJson(def);
          canonicalized++;
        }
      } catch (e) {
        throw new SnapshotBuilderError(`tool '${t.name}': ${(e as Error).message}`, { cause: e });
      }
      return { name: t.name, schema_hash: hashToFixed64(schema) };
    });
    let optionsHash = '0';
    if (req.options !== undefined && req.options !== '') {
      try {
        optionsHash = hashToFixed64(hashJson(req.options));
      } catch (e) {
        throw new SnapshotBuilderError(`options: ${(e as Error).message}`, { cause: e });
      }
    }
    let messageChain: string[] = [];
    if (req.messageBlocks && req.messageBlocks.length) {
      const before = this.chain.canonicalized;
      try {
        messageChain = this.chain.update(req.messageBlocks).map(hashToFixed64);
      } catch (e) {
        throw new SnapshotBuilderError(`message block: ${(e as Error).message}`, { cause: e });
      }
      this.stats.messageBlocksCanonicalized += this.chain.canonicalized - before;
    }
    this.schemaHashes = newSchemaHashes;
    this.stats.toolDefinitionsCanonicalized += canonicalized;
    const snapshot: Snapshot = {
      agent: this.options.agent,
      session_id: this.options.sessionId,
      lane: this.options.lane ?? '',
      request_id: req.requestId,
      request_time: toTimestamp(req.time),
      provider: req.provider,
      model: req.model,
      system_hash: hashToFixed64(hashBytes(req.systemPrompt ?? '')),
      system_sections: (req.systemSections ?? []).map((s) => ({
        name: s.name, hash: hashToFixed64(hashBytes(s.text)),
      })),
      tools: toolRefs,
      options_hash: optionsHash,
      message_chain: messageChain,
      expected_drop: req.expectedDrop ?? 'EXPECTED_DROP_UNSPECIFIED',
      tool_order_policy: this.toolOrder.isExplicit
        ? 'TOOL_ORDER_POLICY_EXPLICIT' : 'TOOL_ORDER_POLICY_LEXICOGRAPHIC',
    };
    if (req.cacheControl) {
      snapshot.cache_control = withBlocksAfter(req.cacheControl, {
        PROMPT_SEGMENT_TOOLS: toolRefs.length,
        PROMPT_SEGMENT_SYSTEM: snapshot.system_sections?.length ?? 0,
        PROMPT_SEGMENT_MESSAGES: req.messageBlocks?.length ?? 0,
      });
    }
    return snapshot;
  }
}
