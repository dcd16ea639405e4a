// Reporter: streams snapshots and usages to cachewatchd over one long-lived
// Record stream without ever blocking or failing the agent
// (C++ client/include/cachewatch/client/reporter.h).
//   - reportSnapshot / reportUsage are synchronous, never throw, and only
//     queue the record; false (and a counted drop) when the queue is full.
//   - In the background a bidi Record stream sends the queue; a record is
//     kept until the daemon acks it. When the stream breaks the reporter
//     reconnects with exponential backoff and jitter and first sends again
//     the records not yet acked (the daemon is idempotent per request id).
//   - An ack with RESOURCE_EXHAUSTED (8) or UNAVAILABLE (14) is retried after
//     a backoff; any other non-OK code is final (rejected).
import * as grpc from '@grpc/grpc-js';
import { loadCacheWatchService } from './proto.js';
import { Snapshot, Usage } from './types.js';

export interface ReporterOptions {
  /** Default '127.0.0.1:50051'. */
  address?: string;
  credentials?: grpc.ChannelCredentials;
  /** Records waiting to be sent beyond which a new one is dropped. Default 10000. */
  maxQueuedRecords?: number;
  /** Sent but unacked records at most. Default 1000. */
  maxUnackedRecords?: number;
  /** Backoff in ms. Defaults 100 and 10000. */
  initialBackoffMs?: number;
  maxBackoffMs?: number;
  /** Where the .proto files are (default: the repository's proto/). */
  protoDir?: string;
}

export interface ReporterStats {
  enqueued: number;
  sent: number;
  acked: number;
  rejected: number;
  retried: number;
  dropped: number;
  reconnects: number;
  connected: boolean;
}

interface Entry {
  seq: number;
  key: string;  // is_usage + request_id, what an ack names.
  record: { snapshot?: Snapshot; usage?: Usage };
}

interface Ack { request_id: string; is_usage: boolean; code: number; message: string }

const RETRYABLE = new Set([8, 14]);

export class Reporter {
  private readonly opts: Required<Omit<ReporterOptions, 'credentials' | 'protoDir'>>;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  private readonly client: any;
  private readonly counts: ReporterStats = {
    enqueued: 0, sent: 0, acked: 0, rejected: 0, retried: 0, dropped: 0, reconnects: 0, connected: false,
  };
  private nextSeq = 0;
  private pending: Entry[] = [];  // Not sent (resends first, by seq).
  private unacked = new Map<number, Entry>();
  private unackedByKey = new Map<string, number[]>();
  private call: grpc.ClientDuplexStream<unknown, Ack> | null = null;
  private broken = false;  // The last stream broke (the next one is a reconnect).
  private backoff: number;
  private timer: NodeJS.Timeout | null = null;
  private resumeAt = 0;
  private closed = false;
  private waiters: Array<() => void> = [];
  // The daemon last failed us (a stream broke, or it answered UNAVAILABLE
  // / RESOURCE_EXHAUSTED) and has not acknowledged a record since.
  private failing = false;

  constructor(options: ReporterOptions = {}) {
    this.opts = {
      address: options.address ?? '127.0.0.1:50051',
      maxQueuedRecords: Math.max(0, options.maxQueuedRecords ?? 10000),
      maxUnackedRecords: Math.max(1, options.maxUnackedRecords ?? 1000),
      initialBackoffMs: Math.max(1, options.initialBackoffMs ?? 100),
      maxBackoffMs: Math.max(options.initialBackoffMs ?? 100, options.maxBackoffMs ?? 10000),
    };
    this.backoff = this.opts.initialBackoffMs;
    const Ctor = loadCacheWatchService(options.protoDir);
    this.client = new Ctor(this.opts.address, options.credentials ?? grpc.credentials.createInsecure());
  }

  reportSnapshot(snapshot: Snapshot): boolean {
    return this.enqueue(false, snapshot?.request_id, { snapshot });
  }

  reportUsage(usage: Usage): boolean {
    return this.enqueue(true, usage?.request_id, { usage });
  }

  stats(): ReporterStats {
    return { ...this.counts };
  }

  /**
   * False from a stream that broke with records outstanding, a retryable
   * ack (UNAVAILABLE, RESOURCE_EXHAUSTED), or a probe() that found the
   * channel of an idle reporter unable to connect, until the daemon
   * acknowledges a record again or probe() finds its channel READY
   * (FleetReporter routes lanes around a failing daemon).
   */
  healthy(): boolean {
    return !this.failing;
  }

  /**
   * For a reporter with no stream open. A failing one learns that its
   * daemon is back from the channel: READY makes it healthy again. An idle
   * healthy one has no stream to watch its daemon, so the channel does: one
   * that lost its connection (IDLE) is asked to connect again, and one that
   * cannot (TRANSIENT_FAILURE) makes the reporter failing, so that the
   * lanes move before their next record.
   */
  probe(): void {
    if (this.closed || this.call) return;
    const channel = this.client.getChannel();
    if (this.failing) {
      if (channel.getConnectivityState(true) === grpc.connectivityState.READY) this.failing = false;
      return;
    }
    if (this.pending.length > 0 || this.unacked.size > 0) return;
    const state = channel.getConnectivityState(false);
    if (state === grpc.connectivityState.TRANSIENT_FAILURE) this.failing = true;
    else if (state === grpc.connectivityState.IDLE) channel.getConnectivityState(true);
  }

  /** Resolves true once every record enqueued before the call is acked or rejected; false on timeout. */
  flush(timeoutMs: number): Promise<boolean> {
    const target = this.nextSeq;
    const done = () => this.oldestOutstanding() >= target;
    if (done()) return Promise.resolve(true);
    return new Promise((resolve) => {
      const t = setTimeout(() => { finish(false); }, timeoutMs);
      const check = () => { if (done()) finish(true); };
      const finish = (ok: boolean) => {
        clearTimeout(t);
        this.waiters = this.waiters.filter((w) => w !== check);
        resolve(ok);
      };
      this.waiters.push(check);
    });
  }

  /** Waits up to flushTimeoutMs for outstanding records, then closes the stream and channel. */
  async close(flushTimeoutMs = 2000): Promise<void> {
    if (this.closed) return;
    if (flushTimeoutMs > 0) await this.flush(flushTimeoutMs);
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const call = this.call;
    this.call = null;
    if (call) call.cancel();
    this.client.close();
  }

  private enqueue(isUsage: boolean, requestId: unknown, record: Entry['record']): boolean {
    try {
      if (this.closed || typeof requestId !== 'string' ||
          this.pending.length >= this.opts.maxQueuedRecords) {
        this.counts.dropped++;
        return false;
      }
      // A copy: the agent may reuse its object once the call returns.
      const copy = structuredClone(record);
      this.pending.push({ seq: this.nextSeq++, key: `${isUsage ? 'u' : 's'}:${requestId}`, record: copy });
      this.counts.enqueued++;
      this.schedule(0);
      return true;
    } catch {
      this.counts.dropped++;  // E.g. a record structuredClone cannot copy.
      return false;
    }
  }

  private oldestOutstanding(): number {
    let min = this.nextSeq;
    for (const e of this.pending) if (e.seq < min) min = e.seq;
    for (const s of this.unacked.keys()) if (s < min) min = s;
    return min;
  }

  private notify(): void {
    for (const w of this.waiters.slice()) w();
  }

  private schedule(delayMs: number): void {
    if (this.closed || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      try {
        this.pump();
      } catch {
        this.schedule(this.nextBackoff());
      }
    }, delayMs);
    // The reporter alone never keeps the process alive; close() flushes.
    this.timer.unref();
  }

  private nextBackoff(): number {
    const wait = this.backoff / 2 + Math.random() * (this.backoff / 2);
    this.backoff = Math.min(this.backoff * 2, this.opts.maxBackoffMs);
    return Math.round(wait);
  }

  private pump(): void {
    if (this.closed || this.pending.length === 0) return;
    const now = Date.now();
    if (now < this.resumeAt) {
      this.schedule(this.resumeAt - now);
      return;
    }
    if (!this.call) this.open();
    const call = this.call!;
    while (this.pending.length && this.unacked.size < this.opts.maxUnackedRecords) {
      const e = this.pending.shift()!;
      this.unacked.set(e.seq, e);
      const list = this.unackedByKey.get(e.key);
      if (list) list.push(e.seq); else this.unackedByKey.set(e.key, [e.seq]);
      this.counts.sent++;
      call.write(e.record);
    }
  }

  private open(): void {
    if (this.broken) this.counts.reconnects++;
    this.broken = false;
    const call: grpc.ClientDuplexStream<unknown, Ack> = this.client.Record();
    this.call = call;
    call.on('data', (ack: Ack) => this.onAck(ack));
    call.on('metadata', () => { if (this.call === call) this.counts.connected = true; });
    const broke = () => this.onStreamEnd(call);
    call.on('error', broke);
    call.on('end', broke);
    call.on('status', broke);
  }

  private onStreamEnd(call: grpc.ClientDuplexStream<unknown, Ack>): void {
    if (this.call !== call) return;
    this.call = null;
    this.counts.connected = false;
    this.broken = true;
    // A stream that ends with records outstanding failed us; one ended
    // while idle (our own half-close) did not.
    if (this.unacked.size > 0 || this.pending.length > 0) this.failing = true;
    // Everything unacked goes back in front, in sequence order.
    const back = [...this.unacked.values()];
    this.unacked.clear();
    this.unackedByKey.clear();
    this.counts.retried += back.length;
    this.pending = [...back, ...this.pending].sort((a, b) => a.seq - b.seq);
    if (this.pending.length) this.schedule(this.nextBackoff());
  }

  private onAck(ack: Ack): void {
    const key = `${ack.is_usage ? 'u' : 's'}:${ack.request_id}`;
    const list = this.unackedByKey.get(key);
    if (!list || list.length === 0) return;
    const seq = list.shift()!;
    if (list.length === 0) this.unackedByKey.delete(key);
    const e = this.unacked.get(seq)!;
    this.unacked.delete(seq);
    const code = Number(ack.code) || 0;
    if (code === 0) {
      this.failing = false;
      this.counts.acked++;
      this.backoff = this.opts.initialBackoffMs;
    } else if (RETRYABLE.has(code)) {
      this.failing = true;
      this.counts.retried++;
      this.pending.unshift(e);
      this.pending.sort((a, b) => a.seq - b.seq);
      this.resumeAt = Date.now() + this.nextBackoff();
    } else {
      this.counts.rejected++;
    }
    this.notify();
    if (this.pending.length === 0 && this.unacked.size === 0) {
      // Idle: half-close the stream so that nothing keeps the process alive;
      // the next record opens a new one.
      const call = this.call;
      this.call = null;
      this.counts.connected = false;
      if (call) call.end();
      return;
    }
    this.schedule(0);
  }
}
