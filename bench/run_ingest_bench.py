#!/usr/bin/env python3
"""Ingest benchmark: cachewatchd against echo_server, in the same run.

Starts each server on a loopback port it picks (learning the address from
its "listening" JSON line on stderr), drives it with load_generator and
prints a table of records/s and ack latency with PASS/FAIL against the
targets of docs/PERFORMANCE.md:
  - durable ingest >= 80 % of the echo server's throughput (4 unary client
    threads; 1 and 4 Record streams);
  - ack p99 at 50 % load <= echo p99 + the 2 ms group-commit interval
    (open loop, 4 unary threads, 50 % of the daemon's measured maximum; the
    same offered rates are sent to the echo server).
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
GROUP_COMMIT_US = 2000
LOAD_FRACTIONS = (0.25, 0.50, 0.90)


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

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def load(args, address, mode, threads, rate=0):
    argv = [args.load_generator, "--address=" + address, "--mode=" + mode,
            "--threads=%d" % threads, "--duration_s=%g" % args.duration_s]
    if rate:
        argv.append("--rate=%.0f" % rate)
    output = subprocess.run(argv, check=True, capture_output=True, text=True)
    result = json.loads(output.stdout.strip().splitlines()[-1])
    print("  %-7s %s" % (address, output.stdout.strip()), file=sys.stderr)
    return result


CLOSED_LOOP = (("unary", 4), ("stream", 1), ("stream", 4))


def closed_loop(args, server):
    return {(mode, threads): load(args, server.address, mode, threads)
            for mode, threads in CLOSED_LOOP}


def open_loop(args, server, rates):
    return {fraction: load(args, server.address, "unary", 4, rate)
            for fraction, rate in rates.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--daemon", required=True)
    parser.add_argument("--echo_server", required=True)
    parser.add_argument("--load_generator", required=True)
    parser.add_argument("--duration_s", type=float, default=5)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="cachewatch-bench.") as tmp:
        echo = Server([args.echo_server, "--listen=127.0.0.1:0"])
        echo_max = closed_loop(args, echo)
        daemon = Server([args.daemon, "--listen=127.0.0.1:0",
                         "--metrics-listen=127.0.0.1:0",
                         "--db-path=" + os.path.join(tmp, "bench.db")])
        daemon_max = closed_loop(args, daemon)
        unary_max = daemon_max[("unary", 4)]["records_per_s"]
        rates = {f: f * unary_max for f in LOAD_FRACTIONS}
        daemon_open = open_loop(args, daemon, rates)
        daemon.stop()
        echo_open = open_loop(args, echo, rates)
        echo.stop()

    print("\nThroughput (records/s, closed loop, %gs each)" % args.duration_s)
    print("| load | echo | cachewatchd | ratio | target | result |")
    print("|---|---|---|---|---|---|")
    for mode, threads in CLOSED_LOOP:
        echo_rate = echo_max[(mode, threads)]["records_per_s"]
        daemon_rate = daemon_max[(mode, threads)]["records_per_s"]
        ratio = daemon_rate / echo_rate if echo_rate else 0
        ok = ratio >= THROUGHPUT_TARGET
        name = ("%d unary threads" % threads if mode == "unary" else
                "%d stream%s" % (threads, "s" if threads > 1 else ""))
        print("| %s | %.0f | %.0f | %.2f | >= %.2f | %s |" % (
            name, echo_rate, daemon_rate, ratio, THROUGHPUT_TARGET,
            "PASS" if ok else "FAIL"))

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
    errors = sum(r["errors"] for r in list(daemon_max.values()) +
                 list(daemon_open.values()))
    print("\ncachewatchd errors (non-OK answers or acks): %d" % errors)
    return 0


if __name__ == "__main__":
    sys.exit(main())
