// How the SDK wrappers see a call's usage without changing what the caller
// gets or making anything happen that the caller did not ask for.
//
// The parsed response: the SDKs' create returns an APIPromise that parses the
// body only when asked (await/then/catch/finally, withResponse(), helpers that
// derive a promise with _thenUnwrap) and hands the raw Response unread to
// asResponse(). Awaiting it ourselves would read the body behind the caller's
// back (asResponse() and derived promises then fail: "Body has already been
// read"), so the wrapper wraps that promise's own `parseResponse` and sees the
// value whenever, and however, the caller has it parsed; a body taken with
// asResponse() is not read and reports no usage. Anything else thenable (a
// plain Promise) is observed with then().
//
// A stream: the resolved stream object's own [Symbol.asyncIterator] — and, for
// the SDKs' Stream, its `iterator` — are wrapped in place, so each event is
// shown to `observe` on its way to the caller and `finish` runs once when the
// iteration ends (done, break/return, or error). `for await`, the SDK helpers
// (messages.stream(), chat.completions.stream(), responses.stream()),
// tee() and toReadableStream() all read through one of the two. Observers
// never throw into the caller.

/* eslint-disable @typescript-eslint/no-explicit-any */
type Json = any;

export interface StreamTap {
  observe(event: Json): void;
  finish(): void;
}

function safe(fn: () => void): void {
  try { fn(); } catch { /* never into the caller */ }
}

const TAPPED = Symbol('cachewatch.tapped');

/** Patches `stream` in place; returns false when it is not an async iterable. */
export function tapAsyncIterable(stream: Json, tap: StreamTap): boolean {
  try {
    if (!stream || typeof stream[Symbol.asyncIterator] !== 'function') return false;
    let finished = false;
    const finish = () => { if (!finished) { finished = true; safe(() => tap.finish()); } };
    const wrap = (it: Json) => {
      if (!it || typeof it.next !== 'function' || it[TAPPED]) return it;
      const wrapped: Json = {
        [TAPPED]: true,
        async next(...args: any[]) {
          let r;
          try {
            r = await it.next(...args);
          } catch (e) {
            finish();
            throw e;
          }
          if (r.done) finish();
          else safe(() => tap.observe(r.value));
          return r;
        },
        async return(value?: unknown) {
          finish();
          return typeof it.return === 'function' ? it.return(value) : { done: true, value };
        },
        [Symbol.asyncIterator]() { return wrapped; },
      };
      if (typeof it.throw === 'function') {
        wrapped.throw = async (e: unknown) => { finish(); return it.throw(e); };
      }
      return wrapped;
    };
    // The SDKs' Stream: [Symbol.asyncIterator]() returns this.iterator(), which
    // tee() (openai) also calls directly; an iterator wrapped once is not again.
    const keys: Array<string | symbol> = [Symbol.asyncIterator];
    if (typeof stream.iterator === 'function') keys.push('iterator');
    for (const key of keys) {
      const original = stream[key];
      const patched = function (...a: any[]) { return wrap(original.apply(stream, a)); };
      Object.defineProperty(stream, key, { value: patched, configurable: true, writable: true });
    }
    return true;
  } catch {
    return false;
  }
}

/**
 * Calls `onData` with the parsed value of `result` each time it is parsed —
 * through the SDK APIPromise's `parseResponse`, or then() for other thenables.
 * `result` itself is not replaced.
 */
export function watchParsed(result: Json, onData: (data: Json) => void): void {
  try {
    if (!result || typeof result.then !== 'function') return;
    if (typeof result.parseResponse === 'function' && typeof result.asResponse === 'function') {
      const parse = result.parseResponse;
      result.parseResponse = function (this: unknown, ...a: any[]) {
        return Promise.resolve(parse.apply(this, a)).then((data: Json) => {
          safe(() => onData(data));
          return data;
        });
      };
    } else {
      result.then((data: Json) => safe(() => onData(data)), () => { /* the agent sees its own error */ });
    }
  } catch { /* never into the caller */ }
}

/** The usage and model a streamed response has shown so far. */
export interface UsageSeen {
  usage: Json;
  model: unknown;
  /** The provider's cache diagnostics, by the response field that held them. */
  diagnostics?: Record<string, Json>;
}

/**
 * The response fields that carry the provider's own cache diagnostics:
 * Anthropic's `diagnostics` (with `cache_miss_reason`), OpenAI Responses'
 * `prompt_cache_diagnostics`. Passed to the daemon verbatim beside the usage.
 */
export const DIAGNOSTIC_FIELDS = ['diagnostics', 'prompt_cache_diagnostics'] as const;

/** The diagnostic fields `response` carries (not null), or undefined. */
export function diagnosticsOf(response: Json): Record<string, Json> | undefined {
  let found: Record<string, Json> | undefined;
  for (const field of DIAGNOSTIC_FIELDS) {
    const value = response?.[field];
    if (value !== undefined && value !== null) (found ??= {})[field] = value;
  }
  return found;
}

/**
 * Reports a call's usage at most once: from the parsed response of a plain
 * call, or for a stream from what `observe` gathers into `seen` from its
 * events — reported when `observe` returns true (the final event) or when the
 * stream ends. Never throws into the caller.
 */
export function reportUsageOf(result: Json, stream: boolean,
    report: (usage: Json, model: unknown, diagnostics?: Record<string, Json>) => void,
    observe: (event: Json, seen: UsageSeen) => boolean): void {
  let reported = false;
  const once = (usage: Json, model: unknown, diagnostics?: Record<string, Json>) => {
    if (!reported && usage) { reported = true; report(usage, model, diagnostics); }
  };
  watchParsed(result, (data: Json) => {
    if (!stream) {
      once(data?.usage, data?.model, diagnosticsOf(data));
      return;
    }
    const seen: UsageSeen = { usage: null, model: undefined };
    tapAsyncIterable(data, {
      observe(event: Json) { if (observe(event, seen)) once(seen.usage, seen.model, seen.diagnostics); },
      finish() { once(seen.usage, seen.model, seen.diagnostics); },
    });
  });
}
