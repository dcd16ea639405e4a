#!/usr/bin/env python3
"""Ingest benchmark: cachewatchd against echo_server, in the same run.

Starts each server on a loopback port it picks (learning the address from
its "listening" JSON line on stderr), drives it with load_generator and
prints a table of records/s and ack latency with PASS/FAIL against the
targets of docs/PERFORMANCE.md:
  - durable ingest >= 80 % of the echo server's throughput (4 unary client
    threads; 1 and 4 Record streams), and CPU per record <= 2x the echo
    server's: medians of --runs runs, echo and cachewatchd alternating;
  - ack p99 at 50 % load <= echo p99 + one group-commit interval, taken as
    the 2 ms window the target was set against (the daemon no longer waits
    for a window: it commits as soon as no commit is in flight) (open loop,
    4 unary threads, 50 % of the daemon's measured maximum; the same offered
    rates are sent to the echo server).
Then the scaling curve: records/s and ack p99 as the clients double from 1
to 64 (unary threads, and Record streams), against both servers, with each
server's CPU use (from /proc/<pid>/stat) to show where and why it bends.
cachewatchd runs with a database in a fresh temporary directory. A FAIL is
reported, not an error: the exit status is 0 once every run completed.
Standard library only.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading

THROUGHPUT_TARGET = 0.80
CPU_TARGET = 2.0  # cachewatchd's CPU per record <= 2x the echo server's.
GROUP_COMMIT_US = 2000
LOAD_FRACTIONS = (0.25, 0.50, 0.90)
SCALING_CLIENTS = (1, 2, 4, 8, 16, 32, 64)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class Server:
    """A server process and the gRPC address from its "listening" line."""

    def __init__(self, argv):
        self.process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True)
        self.address = None
        listening = threading.Event()

        def read_stderr():
            for line in self.process.stderr:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if entry.get("msg") == "listening" and self.address is None:
                    self.address = entry["grpc"]
                    listening.set()
            listening.set()

        self.reader = threading.Thread(target=read_stderr, daemon=True)
        self.reader.start()
        if not listening.wait(30) or self.address is None:
            self.stop()
            sys.exit("cannot start %s" % " ".join(argv))

    def cpu_seconds(self):
        """User + system CPU time of the process (all threads) so far."""
        with open("/proc/%d/stat" % self.process.pid) as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def load(args, address, mode, threads, rate=0, duration_s=None):
    argv = [args.load_generator, "--address=" + address, "--mode=" + mode,
            "--threads=%d" % threads,
            "--duration_s=%g" % (duration_s or args.duration_s)]
    if rate:
        argv.append("--rate=%.0f" % rate)
    output = subprocess.run(argv, check=True, capture_output=True, text=True)
    result = json.loads(output.stdout.strip().splitlines()[-1])
    print("  %-7s %s" % (address, output.stdout.strip()), file=sys.stderr)
    return result


CLOSED_LOOP = (("unary", 4), ("stream", 1), ("stream", 4))


def timed_load(args, server, mode, threads):
    """A load run plus the server's CPU microseconds per record it
    acknowledged (CPU over the whole run, records over its window)."""
    cpu_before = server.cpu_seconds()
    result = load(args, server.address, mode, threads)
    cpu = server.cpu_seconds() - cpu_before
    result["cpu_us_per_record"] = (1e6 * cpu / result["records"]
                                   if result["records"] else 0)
    return result


def closed_loop(args, echo, daemon):
    """Each row run args.runs times on each server, the two servers
    alternating so that both see the same load from the rest of the
    machine. (server, mode, threads) -> list of results."""
    results = {}
    for _ in range(args.runs):
        for mode, threads in CLOSED_LOOP:
            for name, server in (("echo", echo), ("daemon", daemon)):
                results.setdefault((name, mode, threads), []).append(
                    timed_load(args, server, mode, threads))
    return results


def median(values):
    values = sorted(values)
    middle = len(values) // 2
    return (values[middle] if len(values) % 2 else
            (values[middle - 1] + values[middle]) / 2)


def open_loop(args, server, rates):
    return {fraction: load(args, server.address, "unary", 4, rate)
            for fraction, rate in rates.items()}


def scaling(args, server):
    """(mode, clients) -> load result plus the server's CPU seconds per
    second of the run (1.0 = one core busy)."""
    results = {}
    for mode in ("unary", "stream"):
        for clients in SCALING_CLIENTS:
            cpu_before = server.cpu_seconds()
            result = load(args, server.address, mode, clients,
                          duration_s=args.scaling_duration_s)
            # The run lasts the window plus connection set-up; charging the
            # CPU to the window alone slightly overstates it.
            result["cpu"] = ((server.cpu_seconds() - cpu_before) /
                             args.scaling_duration_s)
            results[(mode, clients)] = result
    return results


def print_scaling(echo, daemon):
    print("\nScaling (closed loop, %gs per step; records/s, ack p99 in us, "
          "server CPU in cores)" % ARGS.scaling_duration_s)
    print("| mode | clients | echo records/s | echo p99 | echo CPU | "
          "cachewatchd records/s | cachewatchd p99 | cachewatchd CPU | "
          "ratio | cachewatchd CPU ms per 1k records |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for mode in ("unary", "stream"):
        for clients in SCALING_CLIENTS:
            e, d = echo[(mode, clients)], daemon[(mode, clients)]
            ratio = (d["records_per_s"] / e["records_per_s"]
                     if e["records_per_s"] else 0)
            per_k = (1000 * 1000 * d["cpu"] / d["records_per_s"]
                     if d["records_per_s"] else 0)
            print("| %s | %d | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f | "
                  "%.2f | %.1f |" % (
                      mode, clients, e["records_per_s"], e["p99_us"],
                      e["cpu"], d["records_per_s"], d["p99_us"], d["cpu"],
                      ratio, per_k))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--daemon", required=True)
    parser.add_argument("--echo_server", required=True)
    parser.add_argument("--load_generator", required=True)
    parser.add_argument("--duration_s", type=float, default=5)
    parser.add_argument("--scaling_duration_s", type=float, default=3)
    parser.add_argument("--daemon_arg", action="append", default=[],
                        help="extra cachewatchd flag (repeatable)")
    parser.add_argument("--runs", type=int, default=3,
                        help="closed-loop runs per row and server (medians)")
    parser.add_argument("--skip_scaling", action="store_true")
    args = parser.parse_args()
    global ARGS
    ARGS = args

    with tempfile.TemporaryDirectory(prefix="cachewatch-bench.") as tmp:
        load_before = os.getloadavg()
        echo = Server([args.echo_server, "--listen=127.0.0.1:0"])
        daemon = Server([args.daemon, "--listen=127.0.0.1:0",
                         "--metrics-listen=127.0.0.1:0",
                         "--db-path=" + os.path.join(tmp, "bench.db")] +
                        args.daemon_arg)
        closed = closed_loop(args, echo, daemon)
        load_after = os.getloadavg()
        unary_max = median([r["records_per_s"]
                            for r in closed[("daemon", "unary", 4)]])
        rates = {f: f * unary_max for f in LOAD_FRACTIONS}
        daemon_open = open_loop(args, daemon, rates)
        daemon_scaling = None if args.skip_scaling else scaling(args, daemon)
        daemon.stop()
        echo_open = open_loop(args, echo, rates)
        echo_scaling = None if args.skip_scaling else scaling(args, echo)
        echo.stop()

    print("\nThroughput (records/s, closed loop, %gs each; medians of %d "
          "runs, echo and cachewatchd alternating; load average %.1f "
          "before, %.1f after)" % (args.duration_s, args.runs,
                                   load_before[0], load_after[0]))
    print("| load | echo | cachewatchd | ratio (runs) | target | result | "
          "CPU us/record echo / cachewatchd | ratio | target | result |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for mode, threads in CLOSED_LOOP:
        echo_runs = closed[("echo", mode, threads)]
        daemon_runs = closed[("daemon", mode, threads)]
        ratios = [d["records_per_s"] / e["records_per_s"]
                  if e["records_per_s"] else 0
                  for e, d in zip(echo_runs, daemon_runs)]
        ratio = median(ratios)
        echo_cpu = median([r["cpu_us_per_record"] for r in echo_runs])
        daemon_cpu = median([r["cpu_us_per_record"] for r in daemon_runs])
        cpu_ratio = daemon_cpu / echo_cpu if echo_cpu else 0
        name = ("%d unary threads" % threads if mode == "unary" else
                "%d stream%s" % (threads, "s" if threads > 1 else ""))
        print("| %s | %.0f | %.0f | %.2f (%s) | >= %.2f | %s | "
              "%.0f / %.0f | %.1f | <= %.1f | %s |" % (
                  name, median([r["records_per_s"] for r in echo_runs]),
                  median([r["records_per_s"] for r in daemon_runs]), ratio,
                  " ".join("%.2f" % r for r in ratios), THROUGHPUT_TARGET,
                  "PASS" if ratio >= THROUGHPUT_TARGET else "FAIL",
                  echo_cpu, daemon_cpu, cpu_ratio, CPU_TARGET,
                  "PASS" if cpu_ratio <= CPU_TARGET else "FAIL"))

    print("\nAck latency, open loop, 4 unary threads (us; p50 / p99 / p99.9)")
    print("| load | offered records/s | echo | cachewatchd | target "
          "(p99) | result |")
    print("|---|---|---|---|---|---|")
    for fraction in LOAD_FRACTIONS:
        e, d = echo_open[fraction], daemon_open[fraction]
        target = e["p99_us"] + GROUP_COMMIT_US
        result = "-"
        if fraction == 0.50:
            result = "PASS" if d["p99_us"] <= target else "FAIL"
        print("| %d %% | %.0f | %.0f / %.0f / %.0f | %.0f / %.0f / %.0f | "
              "%s | %s |" % (
                  fraction * 100, rates[fraction], e["p50_us"], e["p99_us"],
                  e["p999_us"], d["p50_us"], d["p99_us"], d["p999_us"],
                  "<= %.0f" % target if fraction == 0.50 else "-", result))
    errors = sum(r["errors"] for (name, _, _), runs in closed.items()
                 if name == "daemon" for r in runs)
    errors += sum(r["errors"] for r in daemon_open.values())
    print("\ncachewatchd errors (non-OK answers or acks): %d" % errors)
    if daemon_scaling is not None:
        print_scaling(echo_scaling, daemon_scaling)
    return 0


if __name__ == "__main__":
    sys.exit(main())
