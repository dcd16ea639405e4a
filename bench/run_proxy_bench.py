#!/usr/bin/env python3
"""HTTP proxy benchmark: cachewatchd --proxy-listen against going direct to
the same loopback upstream (bench/proxy_upstream.mjs, node:http), in the
same run, runs interleaved.

Measured per run, for each path (direct, proxy), with one keep-alive
connection (HTTP/1.1, as an agent holds one):
  - a 200 KB Anthropic Messages request (50 tools, a long history) answered
    with JSON, open loop at --rate requests/s: latency p50/p99;
  - the same request streamed (8 SSE events, 2 ms apart): time to first
    body byte and to the last, p50;
  - closed loop with --threads connections: requests/s, and the daemon's
    CPU per request (from /proc/<pid>/stat; the observation, the pipeline
    and the SQLite commit included). The observer cannot keep up with the
    closed loop and drops most exchanges (counted as queue_full), so the
    CPU of an observed exchange is the open loop's, also printed.
Reported: the median over --runs runs of each figure, the proxy's added
latency (proxy - direct, same run) and ratios proxy / direct, with
PASS/FAIL against docs/PROXY.md's targets:
  - added p99 <= 1 ms at 100 requests/s;
  - time to first streamed byte unchanged within noise: added p50 <= 1 ms.
A FAIL is reported, not an error: the exit status is 0 once every run
completed. Standard library only.
"""

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
ADDED_P99_TARGET_MS = 1.0
ADDED_TTFB_TARGET_MS = 1.0


def request_body(stream):
    """A 200 KB request: 50 tools of ~1.5 KB, a history of ~125 KB."""
    tools = []
    for i in range(50):
        properties = {
            f"field_{j}": {"type": "string",
                           "description": f"field {j} of tool {i}: " + "x" * 40}
            for j in range(18)
        }
        tools.append({"name": f"tool_{i:02d}", "description": f"tool {i}",
                      "input_schema": {"type": "object",
                                       "properties": properties}})
    messages = []
    for i in range(100):
        messages.append({"role": "user", "content": f"question {i} " + "q" * 600})
        messages.append({"role": "assistant", "content": f"answer {i} " + "a" * 600})
    messages.append({"role": "user", "content": "and now?"})
    body = {"model": "claude-sonnet-4-6", "max_tokens": 1024,
            "system": "You are the benchmark agent.", "tools": tools,
            "messages": messages}
    if stream:
        body["stream"] = True
    return json.dumps(body, separators=(",", ":")).encode()


HEADERS = {"content-type": "application/json", "anthropic-version": "2023-06-01",
           "x-api-key": "sk-ant-bench"}


class Process:
    """A child process and the JSON line it announces itself with."""

    def __init__(self, argv, key, stream_name):
        self.process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, text=True,
            stdout=subprocess.PIPE if stream_name == "stdout" else subprocess.DEVNULL,
            stderr=subprocess.PIPE if stream_name == "stderr" else subprocess.DEVNULL)
        self.line = None
        ready = threading.Event()
        source = getattr(self.process, stream_name)

        def read():
            for line in source:
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if self.line is None and entry.get(key):
                    self.line = entry
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        ready.wait(30)
        if self.line is None:
            self.stop()
            sys.exit(f"{argv[0]} did not start")

    def cpu_seconds(self):
        with open(f"/proc/{self.process.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def connect(address):
    host, port = address.rsplit(":", 1)
    return http.client.HTTPConnection(host, int(port))


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def open_loop(address, body, rate, seconds):
    """Latencies in ms of JSON requests sent at `rate` per second."""
    conn = connect(address)
    latencies = []
    start = time.perf_counter()
    for i in range(int(rate * seconds)):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        sent = time.perf_counter()
        conn.request("POST", "/v1/messages", body, HEADERS)
        response = conn.getresponse()
        response.read()
        latencies.append((time.perf_counter() - sent) * 1000)
        assert response.status == 200, response.status
    conn.close()
    return latencies


def streamed(address, body, count):
    """(time to first body byte, time to last byte) in ms per streamed request."""
    conn = connect(address)
    firsts, lasts = [], []
    for _ in range(count):
        sent = time.perf_counter()
        conn.request("POST", "/v1/messages", body, HEADERS)
        response = conn.getresponse()
        first = response.read1(65536)
        firsts.append((time.perf_counter() - sent) * 1000)
        rest = response.read()
        lasts.append((time.perf_counter() - sent) * 1000)
        assert first.startswith(b"event: message_start") and b"message_delta" in rest
        time.sleep(0.005)
    conn.close()
    return firsts, lasts


def closed_loop(address, body, threads, seconds):
    """Requests completed per second by `threads` keep-alive connections."""
    done = [0] * threads
    deadline = time.perf_counter() + seconds

    def run(i):
        conn = connect(address)
        while time.perf_counter() < deadline:
            conn.request("POST", "/v1/messages", body, HEADERS)
            conn.getresponse().read()
            done[i] += 1
        conn.close()

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return sum(done), time.perf_counter() - start


def one_run(args, upstream, proxy, daemon, json_body, stream_body):
    figures = {}
    for path, address in (("direct", upstream), ("proxy", proxy)):
        open_cpu_before = daemon.cpu_seconds()
        latencies = open_loop(address, json_body, args.rate, args.seconds)
        time.sleep(0.5)  # The observer ends the last exchanges' work.
        open_cpu = daemon.cpu_seconds() - open_cpu_before
        firsts, lasts = streamed(address, stream_body, args.streams)
        cpu_before = daemon.cpu_seconds()
        requests, elapsed = closed_loop(address, json_body, args.threads,
                                        args.seconds)
        cpu = daemon.cpu_seconds() - cpu_before
        figures[path] = {
            "p50_ms": percentile(latencies, 0.50),
            "p99_ms": percentile(latencies, 0.99),
            "ttfb_ms": percentile(firsts, 0.50),
            "ttlb_ms": percentile(lasts, 0.50),
            "rps": requests / elapsed,
        }
        # Only the proxied requests are the daemon's: while the direct ones
        # run, it is still observing the backlog of the last run's closed
        # loop, which no direct request caused.
        if path == "proxy":
            figures[path]["cpu_us_per_request"] = cpu / requests * 1e6
            figures[path]["open_cpu_us_per_request"] = (
                open_cpu / len(latencies) * 1e6)
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--daemon", required=True, help="cachewatchd binary")
    parser.add_argument("--upstream", required=True,
                        help="bench/proxy_upstream.mjs")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args()

    json_body = request_body(stream=False)
    stream_body = request_body(stream=True)
    upstream = Process(["node", args.upstream], "listening", "stdout")
    tmp = tempfile.TemporaryDirectory(prefix="proxy-bench-")
    daemon = Process(
        [args.daemon, "--listen=127.0.0.1:0", "--metrics-listen=127.0.0.1:0",
         f"--db-path={tmp.name}/db", "--proxy-listen=127.0.0.1:0",
         f"--proxy-upstream=anthropic=http://{upstream.line['listening']}"],
        "proxy", "stderr")
    def not_observed():
        metrics = http.client.HTTPConnection(*daemon.line["metrics"].rsplit(":", 1))
        metrics.request("GET", "/metrics")
        text = metrics.getresponse().read().decode()
        for line in text.splitlines():
            if line.startswith("cachewatch_proxy_observe_failures_total") and \
                    'reason="queue_full"' in line:
                return int(float(line.split()[-1]))
        return 0

    try:
        runs = []
        for i in range(args.runs):
            runs.append(one_run(args, upstream.line["listening"],
                                daemon.line["proxy"], daemon, json_body,
                                stream_body))
            print(f"run {i + 1}/{args.runs}: " + json.dumps(
                {p: {k: round(v, 3) for k, v in f.items()}
                 for p, f in runs[-1].items()}), flush=True)
        dropped = not_observed()
    finally:
        daemon.stop()
        upstream.stop()
        tmp.cleanup()

    def median(path, key):
        return statistics.median(r[path][key] for r in runs)

    def added(key):
        return statistics.median(r["proxy"][key] - r["direct"][key] for r in runs)

    def ratio(key):
        return statistics.median(r["proxy"][key] / r["direct"][key] for r in runs)

    print(f"\nHTTP proxy vs direct, {len(json_body) // 1024} KB request, "
          f"medians of {args.runs} runs")
    print(f"{'figure':<34}{'direct':>10}{'proxy':>10}{'added':>10}"
          f"{'ratio':>8}  result")
    rows = [
        ("latency p50 (ms) at %g req/s" % args.rate, "p50_ms", None),
        ("latency p99 (ms) at %g req/s" % args.rate, "p99_ms",
         ADDED_P99_TARGET_MS),
        ("stream: first byte p50 (ms)", "ttfb_ms", ADDED_TTFB_TARGET_MS),
        ("stream: last byte p50 (ms)", "ttlb_ms", None),
        (f"requests/s, {args.threads} connections", "rps", None),
    ]
    for label, key, target in rows:
        result = ""
        if target is not None:
            result = ("PASS" if added(key) <= target else "FAIL") + \
                f" (added <= {target:g} ms)"
        print(f"{label:<34}{median('direct', key):>10.3f}"
              f"{median('proxy', key):>10.3f}{added(key):>10.3f}"
              f"{ratio(key):>8.2f}  {result}")
    print(f"{'daemon CPU per request (us):':<34}")
    print(f"{'  open loop, each one observed':<34}{'':>10}"
          f"{median('proxy', 'open_cpu_us_per_request'):>10.1f}")
    print(f"{'  closed loop, most not observed':<34}{'':>10}"
          f"{median('proxy', 'cpu_us_per_request'):>10.1f}")
    print(f"exchanges forwarded but not observed (queue full): {dropped} "
          "(the closed loop outruns the observer; forwarding is unaffected)")


if __name__ == "__main__":
    main()
