#!/usr/bin/env python3
"""Integration test: the dashboards and rules against a real Prometheus that
scrapes a real cachewatchd fed by `cachewatch simulate`.

1. Start cachewatchd on loopback ports it picks (port 0).
2. Run the simulated fleet once.
3. Start Prometheus (scrape and rule evaluation every second) scraping the
   daemon, with dashboards/prometheus/recording_rules.yml and alert_rules.yml.
4. Wait until it has scraped the daemon; run the fleet a second time, so
   that every counter has moved between two scrapes; wait a few scrapes.
5. Check through the HTTP API:
   - Prometheus loaded every rule of both files, and each evaluates without
     error (rule health "ok");
   - every recording rule's expression returns series, and so does the
     series it records;
   - every alert expression evaluates without error, and each operand of its
     comparisons / `and`s returns series (an alert that is not firing
     returns nothing by design; its sides must not);
   - every PromQL expression of every dashboard panel target returns series
     (Grafana variables substituted: $agent, $model, $instance -> .*,
     $__rate_interval -> 1m, $__range -> 5m, $__interval -> 15s);
   - every label_values() template variable has values;
   - every metric name used anywhere exists in the daemon's scrape or is a
     recorded series.
Everything started is stopped at the end, also on failure. Bounded: ~60 s.
"""

import json
import os
import re
import sys
import time
import urllib.error
import urllib.parse

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cwtest  # noqa: E402
import promql  # noqa: E402

BUDGET_SECONDS = 85
RULE_FILES = ("recording_rules.yml", "alert_rules.yml")


class Prometheus:
    def __init__(self, base):
        self.base = base

    def api(self, path, **params):
        url = f"{self.base}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            body = cwtest.http_get(url, timeout=10)
        except urllib.error.HTTPError as error:
            body = error.read().decode("utf-8", "replace")
        reply = json.loads(body)
        return reply

    def query(self, expr):
        """(error or None, result list)."""
        reply = self.api("/api/v1/query", query=expr)
        if reply.get("status") != "success":
            return f"{reply.get('errorType')}: {reply.get('error')}", []
        data = reply["data"]
        if data["resultType"] in ("scalar", "string"):
            return None, [data["result"]]
        return None, data["result"]


def start_prometheus(procs, prometheus, targets, rules_dir, deadline):
    """Starts Prometheus scraping `targets` (host:port metrics addresses) as
    one job, `cachewatch`, with RULE_FILES of `rules_dir`."""
    config = os.path.join(procs.tmp, "prometheus.yml")
    rule_files = [os.path.join(rules_dir, name) for name in RULE_FILES]
    with open(config, "w", encoding="utf-8") as f:
        # JSON is YAML.
        json.dump({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s",
                       "scrape_timeout": "1s"},
            "rule_files": rule_files,
            "scrape_configs": [{
                "job_name": "cachewatch",
                "static_configs": [{"targets": list(targets)}],
            }],
        }, f, indent=2)
    for attempt in range(3):
        port = cwtest.free_port()
        child = procs.add(cwtest.Child(f"prometheus#{attempt}", [
            prometheus, f"--config.file={config}",
            f"--storage.tsdb.path={os.path.join(procs.tmp, f'data{attempt}')}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn"]))
        base = f"http://127.0.0.1:{port}"
        while deadline.left() > 0 and child.proc.poll() is None:
            try:
                if "Ready" in cwtest.http_get(f"{base}/-/ready", timeout=1):
                    cwtest.log(f"prometheus ready on {base}")
                    return Prometheus(base)
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.2)
        if child.proc.poll() is None:
            break
        if "address already in use" not in child.output(20):
            raise RuntimeError(f"prometheus exited ({child.proc.returncode})"
                               f":\n{child.output(20)}")
        cwtest.log(f"port {port} taken; retrying on another port")
    raise RuntimeError("prometheus did not become ready")


def wait_until(deadline, what, predicate, limit):
    end = min(time.monotonic() + limit, deadline.end)
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= end:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.5)


def count_rules(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return (len(re.findall(r"^\s*-\s*record:", text, re.M)),
            len(re.findall(r"^\s*-\s*alert:", text, re.M)))


class Checks:
    """Named checks, retried together until they pass or time runs out
    (the last scrape or rule evaluation may lag by a second)."""

    def __init__(self):
        self.items = []  # (description, function returning error or None)

    def add(self, description, function):
        self.items.append((description, function))

    def run(self, deadline, retry_seconds):
        pending = list(self.items)
        end = min(time.monotonic() + retry_seconds, deadline.end - 3)
        while True:
            failures = []
            for description, function in pending:
                try:
                    error = function()
                except Exception as exc:  # pylint: disable=broad-except
                    error = f"{type(exc).__name__}: {exc}"
                if error:
                    failures.append((description, function, error))
            if not failures or time.monotonic() >= end:
                break
            if len(pending) == len(self.items):
                cwtest.log(f"{len(failures)} checks not passing yet;"
                           " retrying them")
            pending = [(d, f) for d, f, _ in failures]
            time.sleep(1)
        passed = len(self.items) - len(failures)
        cwtest.log(f"{passed} of {len(self.items)} checks passed")
        for description, _, error in failures:
            print(f"FAIL: {description}\n      {error}")
        return not failures


def non_empty(prom, expr):
    def check():
        error, result = prom.query(expr)
        if error:
            return f"query error: {error}\n      expr: {expr}"
        if not result:
            return f"no series\n      expr: {expr}"
        return None
    return check


def no_error(prom, expr):
    def check():
        error, _ = prom.query(expr)
        return f"query error: {error}\n      expr: {expr}" if error else None
    return check


def label_values_check(prom, query):
    match = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\s*\)\s*", query,
                         re.S)
    if not match:
        return lambda: f"not a label_values() query: {query}"
    selector, label = match.group(1), match.group(2)

    def check():
        reply = prom.api(f"/api/v1/label/{label}/values",
                         **{"match[]": selector})
        if reply.get("status") != "success":
            return f"error {reply.get('error')} for {query}"
        if not reply["data"]:
            return f"no values for {query}"
        return None
    return check


def main():
    parser = cwtest.common_args(__doc__.splitlines()[0])
    parser.add_argument("--prometheus", required=True)
    args = parser.parse_args()
    prometheus_bin = cwtest.require_executable(args.prometheus, "prometheus")
    deadline = cwtest.Deadline(BUDGET_SECONDS)
    rules_dir = os.path.join(args.dashboards, "prometheus")
    dashboards = promql.load_dashboards(os.path.join(args.dashboards,
                                                     "grafana"))
    if not dashboards:
        print("FAIL: no dashboards found")
        return 1

    procs = cwtest.Processes("cachewatch-dash-prom-")
    failed = True
    try:
        _, grpc, metrics = cwtest.start_daemon(
            procs, args.cachewatchd, os.path.join(procs.tmp, "cachewatch.db"))
        print(cwtest.simulate(args.cachewatch, grpc, seed=1, tag="dash-a"))
        deadline.check("running the first simulation")

        prom = start_prometheus(procs, prometheus_bin, [metrics], rules_dir,
                                deadline)
        wait_until(deadline, "the first scrape of cachewatchd",
                   lambda: prom.query('up{job="cachewatch"} == 1')[1], 20)
        wait_until(deadline, "a scrape with break counters",
                   lambda: prom.query("cachewatch_breaks_total")[1], 10)
        cwtest.log("prometheus has scraped the daemon")

        print(cwtest.simulate(args.cachewatch, grpc, seed=2, tag="dash-b"))
        deadline.check("running the second simulation")
        time.sleep(4)  # a few scrape and rule evaluation intervals

        scrape = cwtest.http_get(f"http://{metrics}/metrics")
        scraped = {line.split("{")[0].split(" ")[0]
                   for line in scrape.splitlines()
                   if line and not line.startswith("#")}
        # Series Prometheus itself adds to every scrape.
        scraped |= {"up", "scrape_duration_seconds", "scrape_samples_scraped",
                    "scrape_samples_post_metric_relabeling",
                    "scrape_series_added"}

        # --- rules -----------------------------------------------------------
        expected_records, expected_alerts = 0, 0
        for name in RULE_FILES:
            records, alerts = count_rules(os.path.join(rules_dir, name))
            expected_records += records
            expected_alerts += alerts
        def evaluated_groups():
            groups = prom.api("/api/v1/rules")["data"]["groups"]
            evaluated = all(rule.get("lastEvaluation", "").startswith("20")
                            for group in groups for rule in group["rules"])
            return groups if groups and evaluated else None

        groups = wait_until(deadline, "every rule to be loaded and evaluated",
                            evaluated_groups, 10)
        rules = [r for g in groups for r in g["rules"]]
        loaded_records = [r for r in rules if r["type"] == "recording"]
        loaded_alerts = [r for r in rules if r["type"] == "alerting"]
        checks = Checks()
        if (len(loaded_records), len(loaded_alerts)) != (expected_records,
                                                         expected_alerts):
            print(f"FAIL: Prometheus loaded {len(loaded_records)} recording"
                  f" and {len(loaded_alerts)} alerting rules; the files have"
                  f" {expected_records} and {expected_alerts}")
            return 1
        cwtest.log(f"loaded {len(loaded_records)} recording and"
                   f" {len(loaded_alerts)} alerting rules")
        recorded = {r["name"] for r in loaded_records}

        def rule_health(name):
            def check():
                for group in prom.api("/api/v1/rules")["data"]["groups"]:
                    for rule in group["rules"]:
                        if rule["name"] == name and rule["health"] != "ok":
                            return (f"health {rule['health']}:"
                                    f" {rule.get('lastError')}")
                return None
            return check

        for rule in loaded_records:
            checks.add(f"recording rule {rule['name']}: evaluates",
                       rule_health(rule["name"]))
            checks.add(f"recording rule {rule['name']}: expression has series",
                       non_empty(prom, rule["query"]))
            checks.add(f"recording rule {rule['name']}: recorded series exist",
                       non_empty(prom, rule["name"]))
        for rule in loaded_alerts:
            expr = rule["query"]
            checks.add(f"alert {rule['name']}: evaluates",
                       rule_health(rule["name"]))
            checks.add(f"alert {rule['name']}: expression has no error",
                       no_error(prom, expr))
            sides = promql.operands(expr)
            if not promql.has_top_level_filter(expr) or not sides:
                checks.add(f"alert {rule['name']}: is a comparison",
                           lambda e=expr: f"not a comparison: {e}")
            for side in sides:
                checks.add(f"alert {rule['name']}: operand has series",
                           non_empty(prom, side))
        for rule in rules:
            for metric in promql.metric_names(rule["query"]):
                if metric not in scraped and metric not in recorded:
                    checks.add(f"rule {rule['name']}: metric {metric} exists",
                               lambda m=metric: f"{m} is neither scraped"
                               " from cachewatchd nor recorded")

        def label_value_exists(label, value):
            def check():
                reply = prom.api(f"/api/v1/label/{label}/values")
                if value not in reply.get("data", []):
                    return f"no series has {label}={value!r}"
                return None
            return check

        # --- dashboards --------------------------------------------------------
        matchers = set()
        for rule in rules:
            matchers |= promql.equality_matchers(rule["query"])
        total = 0
        for file_name, dashboard in dashboards.items():
            for title, ref, expr in promql.panel_queries(dashboard):
                total += 1
                query = promql.substitute(expr, dashboard)
                checks.add(f"{file_name}: panel {title!r} target {ref}",
                           non_empty(prom, query))
                matchers |= promql.equality_matchers(query)
                for metric in promql.metric_names(query):
                    if metric not in scraped and metric not in recorded:
                        checks.add(
                            f"{file_name}: panel {title!r}: metric {metric}",
                            lambda m=metric: f"{m} is not in the scrape")
            for variable in promql.variables(dashboard):
                if variable.get("type") == "query":
                    query = promql.substitute(promql.variable_query(variable),
                                              dashboard)
                    checks.add(f"{file_name}: variable ${variable['name']}",
                               label_values_check(prom, query))
        for label, value in sorted(matchers):
            checks.add(f"label matcher {label}={value!r} matches a series",
                       label_value_exists(label, value))
        cwtest.log(f"{total} dashboard queries,"
                   f" {len(loaded_records) + len(loaded_alerts)} rules")

        if not checks.run(deadline, retry_seconds=12):
            return 1
        failed = False
        print("PASS")
        return 0
    finally:
        procs.close(failed)


if __name__ == "__main__":
    sys.exit(main())
