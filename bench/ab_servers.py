#!/usr/bin/env python3
"""A/B of ingest servers in the same minutes: the echo server and any number
of cachewatchd binaries (say main's and a branch's), each row of
load_generator run against each server in turn, the order rotating every
round so that no binary always runs first. Every run gets a fresh server and
a fresh database. Per run: records/s, the server's CPU (utime + stime from
/proc) per record acknowledged and, with --perf, its context switches per
record (`perf stat -e context-switches -p PID`). Prints one JSON line per
run, then per row the medians of each server and its ratio to the echo
server's run of the same round.

This is the tool behind docs/PERFORMANCE.md's "A/B" tables of rounds 8b-9b;
bench/run_ingest_bench.py is the PASS/FAIL table of one daemon.

Example:
  bench/ab_servers.py --echo_server=build/bench/echo_server \\
    --load_generator=build/bench/load_generator \\
    --daemon=main=/tmp/base/cachewatchd --daemon=branch=build/daemon/cachewatchd \\
    --rounds=3 --perf
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import time

# The server process, its address and CPU time, and a timed load run: the
# same as the PASS/FAIL table's.
from run_ingest_bench import Server, timed_load

ECHO = "echo"


def parse_args():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--echo_server", required=True,
                        help="bench/echo_server, the baseline of every ratio")
    parser.add_argument("--load_generator", required=True,
                        help="bench/load_generator")
    parser.add_argument("--daemon", action="append", required=True,
                        metavar="NAME=PATH",
                        help="a cachewatchd binary and its name in the output "
                        "(repeatable)")
    parser.add_argument("--daemon_arg", action="append", default=[],
                        help="extra flag for every cachewatchd (repeatable)")
    parser.add_argument("--rows", default="unary:4,stream:1,stream:4",
                        help="MODE:THREADS,... of load_generator "
                        "(default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="runs per row and server (default: %(default)s)")
    parser.add_argument("--duration_s", type=float, default=5,
                        help="seconds per run (default: %(default)s)")
    parser.add_argument("--perf", action="store_true",
                        help="count context switches with perf stat")
    args = parser.parse_args()
    servers = {ECHO: [args.echo_server]}
    for spec in args.daemon:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            parser.error(f"--daemon wants NAME=PATH, not {spec!r}")
        if name in servers:
            parser.error(f"--daemon: the name {name!r} is used twice")
        servers[name] = [path] + args.daemon_arg
    rows = []
    for spec in args.rows.split(","):
        mode, sep, threads = spec.partition(":")
        if mode not in ("unary", "stream") or not sep or not threads.isdigit():
            parser.error(f"--rows wants MODE:THREADS (unary|stream), not {spec!r}")
        rows.append((mode, int(threads)))
    if args.perf and shutil.which("perf") is None:
        parser.error("--perf needs perf (Debian: apt-get install linux-perf)")
    if args.rounds < 1 or args.duration_s <= 0:
        parser.error("--rounds and --duration_s must be positive")
    return args, servers, rows


def run(args, name, argv, mode, threads):
    """One load_generator run against a fresh server (and database)."""
    with tempfile.TemporaryDirectory(prefix="ab_servers.") as tmp:
        argv = argv + ["--listen=127.0.0.1:0"]
        if name != ECHO:
            argv += ["--metrics-listen=",
                     "--db-path=" + os.path.join(tmp, "ab.db")]
        server = Server(argv)
        perf = None
        if args.perf:
            perf = subprocess.Popen(
                ["perf", "stat", "-x,", "-e", "context-switches", "-p",
                 str(server.process.pid)], stderr=subprocess.PIPE, text=True)
            time.sleep(0.2)  # perf attaches.
        result = timed_load(args, server, mode, threads)
        switches = None
        if perf is not None:
            perf.send_signal(signal.SIGINT)
            _, err = perf.communicate()
            for line in err.splitlines():
                parts = line.split(",")
                if len(parts) > 2 and parts[2] == "context-switches":
                    switches = int(parts[0]) if parts[0].isdigit() else None
        server.stop()
    records = max(result["records"], 1)
    return {
        "server": name, "mode": mode, "threads": threads,
        "records_per_s": result["records_per_s"], "records": result["records"],
        "errors": result.get("errors"),
        "cpu_us_per_record": result["cpu_us_per_record"],
        "switches_per_record": None if switches is None else switches / records,
    }


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def main():
    args, servers, rows = parse_args()
    order = list(servers)
    runs = []
    for round_index in range(args.rounds):
        for mode, threads in rows:
            for name in order:
                result = run(args, name, servers[name], mode, threads)
                result.update(round=round_index, load=os.getloadavg()[0],
                              time=time.strftime("%H:%M:%S", time.gmtime()))
                runs.append(result)
                print(json.dumps(result), flush=True)
        order = order[1:] + order[:1]

    print(f"\nMedians of {args.rounds} rounds; ratio = records/s against the "
          "echo server's run of the same round")
    print("| row | server | records/s | ratio to echo | CPU µs/record | "
          "× echo's | context switches/record |")
    print("|---|---|---|---|---|---|---|")
    for mode, threads in rows:
        row = [r for r in runs if r["mode"] == mode and r["threads"] == threads]
        echo = {r["round"]: r for r in row if r["server"] == ECHO}
        echo_cpu = median(r["cpu_us_per_record"] for r in echo.values())
        for name in servers:
            mine = [r for r in row if r["server"] == name]
            ratios = [r["records_per_s"] / echo[r["round"]]["records_per_s"]
                      for r in mine if echo[r["round"]]["records_per_s"] > 0]
            cpu = median(r["cpu_us_per_record"] for r in mine)
            switches = median(r["switches_per_record"] for r in mine)
            print(f"| {mode} ×{threads} | {name} | "
                  f"{median(r['records_per_s'] for r in mine):,.0f} | "
                  f"{median(ratios):.2f} | {cpu:.1f} | {cpu / echo_cpu:.1f} | "
                  + ("-" if switches is None else f"{switches:.2f}") + " |")


if __name__ == "__main__":
    main()
