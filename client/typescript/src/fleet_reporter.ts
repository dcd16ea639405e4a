// FleetReporter: reports to several daemons that share one store
// (docs/FLEET.md), keeping each lane on one daemon. A lane's daemon is the
// first healthy one in the lane's rendezvous order (highest XXH3-64 of
// address + lane key first), so that adding or removing a daemon moves only
// the lanes that were on it. One Reporter per daemon does the streaming
// (reporter.ts); a daemon whose stream broke, that answered UNAVAILABLE,
// or whose channel cannot connect while its reporter is idle (probed every
// probeIntervalMs, as no stream is open then to see it die) is skipped
// until it acknowledges again, or, idle, until its channel is READY again:
// its lanes come back to it. Records already queued for a failing daemon
// stay queued for it and are sent when it returns (the daemons are
// idempotent per request id).
import { hashBytes } from './hash.js';
import { Reporter, ReporterOptions, ReporterStats } from './reporter.js';
import { Snapshot, Usage } from './types.js';

export interface FleetReporterOptions extends Omit<ReporterOptions, 'address'> {
  /** The daemons' gRPC addresses; at least one. */
  addresses: string[];
  /**
   * How often the channel of each daemon whose reporter has no stream open
   * is probed (Reporter.probe), in ms. Default 1000.
   */
  probeIntervalMs?: number;
}

/** The lane key as the daemon reads it (an empty lane is "main"). */
export function laneKeyOf(record: { agent?: string; session_id?: string; lane?: string }): string {
  return `${record.agent ?? ''}\n${record.session_id ?? ''}\n${record.lane || 'main'}`;
}

/** `addresses` in the lane's rendezvous order, best first. */
export function rendezvousOrder(laneKey: string, addresses: string[]): string[] {
  const score = new Map(addresses.map((a) => [a, hashBytes(`${a}\n${laneKey}`)]));
  // Equal-length hex strings compare as the numbers they spell.
  return [...addresses].sort((a, b) => (score.get(a)! < score.get(b)! ? 1 : -1));
}

export class FleetReporter {
  private readonly addresses: string[];
  private readonly reporters = new Map<string, Reporter>();
  private readonly probeTimer: NodeJS.Timeout;

  constructor(options: FleetReporterOptions) {
    this.addresses = [...new Set(options.addresses)];
    if (this.addresses.length === 0) throw new Error('FleetReporter: no daemon address');
    const { addresses: _unused, probeIntervalMs, ...common } = options;
    for (const address of this.addresses) {
      this.reporters.set(address, new Reporter({ ...common, address }));
    }
    this.probeTimer = setInterval(() => {
      for (const r of this.reporters.values()) r.probe();
    }, Math.max(10, probeIntervalMs ?? 1000));
    this.probeTimer.unref();
  }

  reportSnapshot(snapshot: Snapshot): boolean {
    return this.reporterFor(snapshot).reportSnapshot(snapshot);
  }

  reportUsage(usage: Usage): boolean {
    return this.reporterFor(usage).reportUsage(usage);
  }

  /** The daemon a lane's records go to now. */
  addressFor(record: { agent?: string; session_id?: string; lane?: string }): string {
    const order = rendezvousOrder(laneKeyOf(record ?? {}), this.addresses);
    return order.find((a) => this.reporters.get(a)!.healthy()) ?? order[0];
  }

  /** Per daemon. */
  stats(): Record<string, ReporterStats> {
    const out: Record<string, ReporterStats> = {};
    for (const [address, r] of this.reporters) out[address] = r.stats();
    return out;
  }

  /** True once every daemon's reporter flushed within the timeout. */
  async flush(timeoutMs: number): Promise<boolean> {
    const results = await Promise.all([...this.reporters.values()].map((r) => r.flush(timeoutMs)));
    return results.every((ok) => ok);
  }

  async close(flushTimeoutMs = 2000): Promise<void> {
    clearInterval(this.probeTimer);
    await Promise.all([...this.reporters.values()].map((r) => r.close(flushTimeoutMs)));
  }

  private reporterFor(record: { agent?: string; session_id?: string; lane?: string }): Reporter {
    return this.reporters.get(this.addressFor(record))!;
  }
}
