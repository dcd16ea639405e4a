// Helpers shared by the SDK wrappers: observe a streaming response without
// changing what the caller gets. The SDKs return a promise (an APIPromise with
// extra methods) of a Stream object; the wrappers return that very promise and
// patch the resolved object's own [Symbol.asyncIterator] so that each event is
// shown to `observe` on its way to the caller and `finish` runs once when the
// iteration ends (done, break/return, or error). Observers never throw into
// the caller.

/* eslint-disable @typescript-eslint/no-explicit-any */
type Json = any;

export interface StreamTap {
  observe(event: Json): void;
  finish(): void;
}

function safe(fn: () => void): void {
  try { fn(); } catch { /* never into the caller */ }
}

/** Patches `stream` in place; returns false when it is not an async iterable. */
export function tapAsyncIterable(stream: Json, tap: StreamTap): boolean {
  try {
    if (!stream || typeof stream[Symbol.asyncIterator] !== 'function') return false;
    const original = stream[Symbol.asyncIterator];
    let finished = false;
    const finish = () => { if (!finished) { finished = true; safe(() => tap.finish()); } };
    const patched = function (this: Json, ...a: any[]) {
      const it = original.apply(stream, a);
      const wrapped: Json = {
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
    Object.defineProperty(stream, Symbol.asyncIterator, { value: patched, configurable: true, writable: true });
    return true;
  } catch {
    return false;
  }
}

/**
 * Taps the stream `result` resolves to (or `result` itself when it is an async
 * iterable). Returns nothing: the caller gets `result` unchanged. The tap's
 * reaction is registered before the caller's, so the patch is in place before
 * the caller sees the stream.
 */
export function tapStreamResult(result: Json, makeTap: () => StreamTap): void {
  try {
    if (result && typeof result.then === 'function') {
      result.then((stream: Json) => { tapAsyncIterable(stream, makeTap()); }, () => { /* the agent sees its own error */ });
    } else {
      tapAsyncIterable(result, makeTap());
    }
  } catch { /* never into the caller */ }
}

/** The usage and model a streamed response has shown so far. */
export interface UsageSeen {
  usage: Json;
  model: unknown;
}

/**
 * Reports a call's usage exactly once: from the response of a plain call, or
 * for a stream from what `observe` gathers into `seen` from its events —
 * reported when `observe` returns true (the final event) or when the stream
 * ends. Never throws into the caller.
 */
export function reportUsageOf(result: Json, stream: boolean,
    report: (usage: Json, model: unknown) => void,
    observe: (event: Json, seen: UsageSeen) => boolean): void {
  try {
    if (stream) {
      tapStreamResult(result, () => {
        const seen: UsageSeen = { usage: null, model: undefined };
        let reported = false;
        const done = () => {
          if (!reported && seen.usage) { reported = true; report(seen.usage, seen.model); }
        };
        return { observe(event: Json) { if (observe(event, seen)) done(); }, finish: done };
      });
    } else if (result && typeof result.then === 'function') {
      result.then((resp: Json) => {
        if (resp?.usage) report(resp.usage, resp.model);
      }, () => { /* the agent sees its own error */ });
    }
  } catch { /* never into the caller */ }
}
