// The tool-order policy (docs/CLIENT.md "Tool order"; C++ client/include/cachewatch/client/tool_order.h).
//   - lexicographic (default): name as UTF-16 code units (never a locale),
//     then display name; tools equal in both keep their input order;
//   - explicit: a toolOrder list with exactly one '<unlisted-tools>' entry;
//     listed tools take their listed position, the others go, sorted, where
//     the rest entry stands.
// Deferred tools neither revealed nor alwaysLoad are left out unless
// includeDeferred.

export const TOOL_ORDER_REST = '<unlisted-tools>';

export type ToolOrderErrorKind =
  | 'missing_rest_entry'
  | 'multiple_rest_entries'
  | 'duplicate_entry'
  | 'unknown_entry'
  | 'reserved_tool_name'
  | 'missing_name';

export class ToolOrderError extends Error {
  constructor(readonly kind: ToolOrderErrorKind, readonly offending: string, message: string) {
    super(message);
    this.name = 'ToolOrderError';
  }
}

export interface Tool {
  /** Required. The name the provider sees. */
  name: string;
  /** Breaks ties between tools with the same name. Default ''. */
  displayName?: string;
  /** The tool definition as sent (JSON text or value); hashed into the snapshot. */
  definition?: string | unknown;
  shouldDefer?: boolean;
  alwaysLoad?: boolean;
  revealed?: boolean;
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function visible(t: Tool): boolean {
  return !t.shouldDefer || !!t.alwaysLoad || !!t.revealed;
}

export class ToolOrder {
  private constructor(
    private readonly entries: readonly string[] | null,
    private readonly positions: ReadonlyMap<string, number>,
  ) {}

  /** The lexicographic policy. */
  static lexicographic(): ToolOrder {
    return new ToolOrder(null, new Map());
  }

  /** The explicit policy; throws ToolOrderError if the list is malformed. */
  static explicit(entries: readonly string[]): ToolOrder {
    const positions = new Map<string, number>();
    entries.forEach((e, i) => {
      if (typeof e !== 'string' || e === '') {
        throw new ToolOrderError('missing_name', String(e), `toolOrder entry ${i} is not a tool name`);
      }
      if (positions.has(e)) {
        if (e === TOOL_ORDER_REST) {
          throw new ToolOrderError('multiple_rest_entries', e, `toolOrder lists '${TOOL_ORDER_REST}' more than once`);
        }
        throw new ToolOrderError('duplicate_entry', e, `toolOrder lists '${e}' more than once`);
      }
      positions.set(e, i);
    });
    if (!positions.has(TOOL_ORDER_REST)) {
      throw new ToolOrderError('missing_rest_entry', TOOL_ORDER_REST, `toolOrder has no '${TOOL_ORDER_REST}' entry`);
    }
    return new ToolOrder(entries.slice(), positions);
  }

  get isExplicit(): boolean {
    return this.entries !== null;
  }

  /** Returns the indices into `tools` of the tools to send, in order. */
  apply(tools: readonly Tool[], opts: { includeDeferred?: boolean } = {}): number[] {
    for (const t of tools) {
      if (typeof t.name !== 'string' || t.name === '') {
        throw new ToolOrderError('missing_name', '', 'a tool has no name');
      }
      if (t.name === TOOL_ORDER_REST) {
        throw new ToolOrderError('reserved_tool_name', TOOL_ORDER_REST, `a tool is named '${TOOL_ORDER_REST}'`);
      }
    }
    if (this.entries !== null) {
      const names = new Set(tools.map((t) => t.name));
      for (const e of this.entries) {
        if (e !== TOOL_ORDER_REST && !names.has(e)) {
          throw new ToolOrderError('unknown_entry', e, `toolOrder lists '${e}', which no tool has`);
        }
      }
    }
    const idx: number[] = [];
    tools.forEach((t, i) => {
      if (opts.includeDeferred || visible(t)) idx.push(i);
    });
    // Array.prototype.sort is stable.
    idx.sort((a, b) => cmp(tools[a].name, tools[b].name) ||
      cmp(tools[a].displayName ?? '', tools[b].displayName ?? ''));
    if (this.entries !== null) {
      const rest = this.positions.get(TOOL_ORDER_REST)!;
      const pos = (i: number) => this.positions.get(tools[i].name) ?? rest;
      idx.sort((a, b) => pos(a) - pos(b));
    }
    return idx;
  }

  /** The tools to send, in order. */
  order<T extends Tool>(tools: readonly T[], opts: { includeDeferred?: boolean } = {}): T[] {
    return this.apply(tools, opts).map((i) => tools[i]);
  }
}
