#!/usr/bin/env python3
"""Fleet test: a real Prometheus scraping three real cachewatchd that share
one real PostgreSQL store (docs/FLEET.md), with the project's rules.

1. Start PostgreSQL (cwtest.Postgres) and three cachewatchd on it
   (`--store=postgresql://...`), each on its own gRPC and metrics port.
2. Start Prometheus (scrape and rule evaluation every second) scraping the
   three daemons as one job, `cachewatch`, with three targets, and with
   dashboards/prometheus/recording_rules.yml and alert_rules.yml. The rules
   are loaded from a temporary copy in which every `for:` duration is
   rewritten to 2 s, so that an alert fires within seconds instead of
   minutes; the expressions are the files' own.
3. Feed the simulated fleet (`cachewatch simulate`) to each daemon, twice
   (once before the first scrape that sees the counters, once after, so
   that every rate is non-zero).
4. Check through the HTTP API:
   - each recording rule that sums a counter's rate over the daemons
     (turns, breaks, breaks by reason, lost tokens) records one series per
     label set and none with an `instance` label, and at one evaluation
     time its value equals the sum of the three daemons' own series (the
     same expression restricted to one `instance`, queried at that time);
   - the per-daemon ingest rule keeps one series for each daemon;
   - every panel query of the two Grafana dashboards (variables at "All")
     returns series over the fleet, and each overview panel that sums one
     counter (`sum [by (...)] (rate|increase(metric{...}[...]))`) shows at
     one time the sum of the same query restricted to each daemon: the
     overview shows one fleet, not one daemon;
5. Stop PostgreSQL: all three daemons report cachewatch_store_healthy 0,
   and CachewatchStoreUnhealthy fires as exactly ONE alert, without an
   `instance` label (so does CachewatchStoreCommitFailures if commits fail
   in the outage).
6. Start PostgreSQL again: the daemons report healthy and the alert
   resolves (it leaves /api/v1/alerts).
Skips (77) only where the Prometheus or PostgreSQL binaries are missing.
Everything started is stopped at the end, also on failure. Takes ~30 s.
"""

import os
import re
import sys
import time

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cwtest  # noqa: E402
import prometheus_integration_test as integration  # noqa: E402
import promql  # noqa: E402

BUDGET_SECONDS = 300
DAEMONS = 3
FOR_DURATION = "2s"
# Recording rules of the form `sum by (labels) (rate(metric[5m]))`: the
# fleet's series must be the sum of the daemons' own.
FLEET_SUM_RULES = ("cachewatch:turns:rate5m", "cachewatch:breaks:rate5m",
                   "cachewatch:breaks_by_reason:rate5m",
                   "cachewatch:cache_lost_tokens:rate5m")
SUM_OF_RATE = re.compile(
    r"\s*sum by ?\(([\w\s,]*)\) ?\(rate\((\w+)\[5m\]\)\)\s*")
# A dashboard query that sums one counter's rate or increase, optionally
# scaled: its fleet value is the sum of its per-daemon values.
SUMMED_COUNTER = re.compile(
    r"\s*(sum(?: by \([\w\s,]*\))?) ?\((rate|increase)\((\w+)\{([^{}]*)\}"
    r"(\[[^\]]+\])\)\)(\s*\*\s*\d+)?\s*")
# Store alerts that must fire once for the fleet, not once per daemon.
STORE_ALERTS = ("CachewatchStoreUnhealthy", "CachewatchStoreCommitFailures")


def copy_rules(rules_dir, into):
    """Copies the rule files with every `for:` set to FOR_DURATION."""
    os.mkdir(into)
    for name in integration.RULE_FILES:
        with open(os.path.join(rules_dir, name), encoding="utf-8") as f:
            text = f.read()
        text, count = re.subn(r"^(\s*for:\s*)\S+", rf"\g<1>{FOR_DURATION}",
                              text, flags=re.M)
        cwtest.log(f"{name}: {count} `for:` durations set to {FOR_DURATION}")
        with open(os.path.join(into, name), "w", encoding="utf-8") as f:
            f.write(text)


def settle(deadline, what, check, limit):
    """Retries check() (None when it passes, else an error) until it passes;
    raises with the last error after `limit` seconds."""
    end = min(time.monotonic() + limit, deadline.end)
    while True:
        error = check()
        if error is None:
            return
        if time.monotonic() >= end:
            raise AssertionError(f"{what}: {error}")
        time.sleep(0.5)


def labels_key(metric):
    return tuple(sorted((k, v) for k, v in metric.items()
                        if k != "__name__"))


def simulate_all(cachewatch, grpcs, round_number):
    """One `cachewatch simulate` per daemon, one after the other: run
    together on a loaded machine, their large group commits can outlast
    the store's 5 s PostgreSQL timeout and be refused."""
    for index, grpc in enumerate(grpcs):
        cwtest.simulate(cachewatch, grpc, seed=10 * round_number + index,
                        tag=f"fleet{round_number}-{index}", timeout=90)


def series_by_instance(prom, expr):
    error, result = prom.query(expr)
    if error:
        raise RuntimeError(f"{expr}: {error}")
    return {r["metric"].get("instance"): float(r["value"][1]) for r in result}


def query_at(prom, expr, at):
    """(error or None, result list) of an instant query at time `at`."""
    reply = prom.api("/api/v1/query", query=expr, time=f"{at:.3f}")
    if reply.get("status") != "success":
        return f"{reply.get('errorType')}: {reply.get('error')}", []
    return None, reply["data"]["result"]



def fleet_sum_check(prom, rule, instances):
    """The check that `rule` (a loaded recording rule) is the sum of the
    daemons' own series: None or an error."""
    match = SUM_OF_RATE.fullmatch(rule["query"])
    if not match:
        return f"not `sum by (...) (rate(metric[5m]))`: {rule['query']}"
    by, metric = match.group(1), match.group(2)
    name = rule["name"]
    error, recorded = prom.query(f"{name}[20s]")
    if error:
        return f"query error: {error}"
    if not recorded:
        return "no recorded series"
    keys = [labels_key(r["metric"]) for r in recorded]
    if len(set(keys)) != len(keys):
        return f"two series with the same labels: {keys}"
    for key in keys:
        if "instance" in dict(key):
            return f"a recorded series has an instance label: {dict(key)}"
    # Evaluation times every series was recorded at, newest first, at least
    # 3 s old (every scrape up to then is in the database).
    times = None
    for series in recorded:
        stamps = {float(t) for t, _ in series["values"]}
        times = stamps if times is None else times & stamps
    newest = time.time() - 3
    candidates = sorted((t for t in times if t <= newest), reverse=True)[:4]
    if not candidates:
        return "no evaluation time old enough yet"
    values = {labels_key(r["metric"]): {float(t): float(v)
                                        for t, v in r["values"]}
              for r in recorded}
    last = None
    # A scrape stamped just before an evaluation may have been appended just
    # after it: then that one evaluation differs from a later query at its
    # time. Any of the last few evaluations matching proves the sum.
    for at in candidates:
        total = {}
        contributed = 0
        for instance in instances:
            error, own = query_at(
                prom,
                f'sum by ({by}) (rate({metric}{{instance="{instance}"}}[5m]))',
                at)
            if error:
                return f"query error: {error}"
            if own:
                contributed += 1
            for r in own:
                key = labels_key(r["metric"])
                total[key] = total.get(key, 0.0) + float(r["value"][1])
        recorded_now = {k: v[at] for k, v in values.items() if at in v}
        if contributed != len(instances):
            last = (f"only {contributed} of {len(instances)} daemons have"
                    f" {metric} series at {at}")
            continue
        if set(total) != set(recorded_now):
            last = (f"label sets differ at {at}: recorded"
                    f" {sorted(recorded_now)}, daemons {sorted(total)}")
            continue
        wrong = [(dict(k), recorded_now[k], total[k]) for k in total
                 if abs(recorded_now[k] - total[k])
                 > 1e-9 * max(1.0, abs(total[k]))]
        if wrong:
            last = f"recorded != sum of the daemons at {at}: {wrong[:3]}"
            continue
        if sum(total.values()) <= 0:
            last = f"every rate is 0 at {at}"
            continue
        cwtest.log(f"{name}: {len(total)} fleet series = sum of"
                   f" {len(instances)} daemons at {at:.3f}")
        return None
    return last


def restricted_to(match, instance):
    """The SUMMED_COUNTER query `match` restricted to one daemon."""
    aggregation, function, metric, matchers, window, scale = match.groups()
    return (f'{aggregation} ({function}({metric}{{instance="{instance}",'
            f' {matchers}}}{window})){scale or ""}')


def dashboards_fleet_check(prom, dashboards, instances):
    """None, or why the dashboards do not show the fleet's sum."""
    at = time.time() - 3
    summed = 0
    for file_name, dashboard in dashboards.items():
        for title, ref, expr in promql.panel_queries(dashboard):
            query = promql.substitute(expr, dashboard)
            error, fleet = query_at(prom, query, at)
            if error:
                return f"{file_name} {title!r} {ref}: {error}"
            if not fleet:
                return f"{file_name} {title!r} {ref}: no series: {query}"
            match = SUMMED_COUNTER.fullmatch(query)
            if file_name != "prompt-cache-overview.json" or not match:
                continue
            total = {}
            for instance in instances:
                error, own = query_at(prom, restricted_to(match, instance), at)
                if error:
                    return f"{title!r} on {instance}: {error}"
                for r in own:
                    key = labels_key(r["metric"])
                    total[key] = total.get(key, 0.0) + float(r["value"][1])
            shown = {labels_key(r["metric"]): float(r["value"][1])
                     for r in fleet}
            if set(shown) != set(total):
                return (f"{title!r}: label sets {sorted(shown)} against the"
                        f" daemons' {sorted(total)}")
            wrong = [(dict(k), shown[k], total[k]) for k in total
                     if abs(shown[k] - total[k]) > 1e-9 * max(1.0, total[k])]
            if wrong:
                return f"{title!r} != sum of the daemons at {at}: {wrong[:3]}"
            summed += 1
    if summed == 0:
        return "no overview panel sums a counter (the pattern is stale)"
    cwtest.log(f"dashboards: every query has series; {summed} overview"
               f" panels = sum of {len(instances)} daemons")
    return None


def store_alerts(prom):
    reply = prom.api("/api/v1/alerts")
    return [a for a in reply["data"]["alerts"]
            if a["labels"].get("alertname") in STORE_ALERTS]


def main():
    parser = cwtest.common_args(__doc__.splitlines()[0])
    parser.add_argument("--prometheus", required=True)
    args = parser.parse_args()
    prometheus_bin = cwtest.require_executable(args.prometheus, "prometheus")
    if not cwtest.postgres_available():
        print(f"SKIPPED: PostgreSQL 15 binaries not found in"
              f" {cwtest.PG_BINDIR}; install postgresql-15"
              " (scripts/install-deps.sh)")
        return 77
    deadline = cwtest.Deadline(BUDGET_SECONDS)
    started = time.monotonic()

    procs = cwtest.Processes("cachewatch-dash-fleet-")
    failed = True
    try:
        pg = procs.add(cwtest.Postgres(procs.tmp))
        pg.create_database("fleet")
        grpcs, targets = [], []
        for index in range(DAEMONS):
            _, grpc, metrics = cwtest.start_daemon(
                procs, args.cachewatchd,
                os.path.join(procs.tmp, f"unused{index}.db"),
                extra=[f"--store={pg.url('fleet')}"])
            grpcs.append(grpc)
            targets.append(metrics)
        rules_dir = os.path.join(procs.tmp, "rules")
        copy_rules(os.path.join(args.dashboards, "prometheus"), rules_dir)
        prom = integration.start_prometheus(procs, prometheus_bin, targets,
                                            rules_dir, deadline)

        def count(expr, wanted):
            def check():
                found = series_by_instance(prom, expr)
                if sorted(found) != sorted(targets):
                    return f"{expr}: instances {sorted(found)}"
                if wanted is not None and set(found.values()) != {wanted}:
                    return f"{expr}: {found}"
                return None
            return check

        settle(deadline, "every daemon scraped",
               count('up{job="cachewatch"}', 1.0), 30)
        simulate_all(args.cachewatch, grpcs, 1)
        settle(deadline, "turn counters of every daemon scraped",
               count("sum by (instance) (cachewatch_turns_total)", None), 20)
        simulate_all(args.cachewatch, grpcs, 2)
        deadline.check("feeding the fleet")

        # --- recording rules: the fleet's series are the daemons' sum ------
        def loaded_rules():
            groups = prom.api("/api/v1/rules")["data"]["groups"]
            return {r["name"]: r for g in groups for r in g["rules"]}

        rules = loaded_rules()
        for name in FLEET_SUM_RULES:
            if name not in rules:
                print(f"FAIL: recording rule {name} is not loaded")
                return 1
            settle(deadline, f"recording rule {name}",
                   lambda rule=rules[name]: fleet_sum_check(prom, rule,
                                                            targets), 30)
        settle(deadline, "cachewatch:ingest_records:rate5m per daemon",
               count('sum by (instance) (cachewatch:ingest_records:rate5m)',
                     None), 15)
        dashboards = promql.load_dashboards(
            os.path.join(args.dashboards, "grafana"))
        settle(deadline, "the Grafana dashboards over the fleet",
               lambda: dashboards_fleet_check(prom, dashboards, targets), 30)
        if store_alerts(prom):
            print(f"FAIL: store alerts before the outage: {store_alerts(prom)}")
            return 1

        # --- PostgreSQL down: one alert for the fleet ------------------------
        cwtest.log("stopping PostgreSQL")
        pg.stop()
        settle(deadline, "every daemon reporting its store unhealthy",
               count("cachewatch_store_healthy", 0.0), 30)

        def unhealthy_firing():
            alerts = [a for a in store_alerts(prom)
                      if a["labels"]["alertname"] == STORE_ALERTS[0]]
            if not any(a["state"] == "firing" for a in alerts):
                return f"not firing: {alerts}"
            return None

        settle(deadline, f"{STORE_ALERTS[0]} firing", unhealthy_firing, 30)
        time.sleep(2)  # Two more evaluations: per-daemon alerts would show.
        alerts = store_alerts(prom)
        for name in STORE_ALERTS:
            instances = [a for a in alerts if a["labels"]["alertname"] == name]
            cwtest.log(f"{name}: {len(instances)} alert(s):"
                       f" {[(a['state'], a['labels']) for a in instances]}")
            if len(instances) > 1 or (name == STORE_ALERTS[0]
                                      and len(instances) != 1):
                print(f"FAIL: {name}: {len(instances)} alerts for one"
                      f" PostgreSQL outage, expected one: {instances}")
                return 1
            for alert in instances:
                if "instance" in alert["labels"]:
                    print(f"FAIL: {name} has an instance label: {alert}")
                    return 1
        # Still three unhealthy daemons behind the one alert.
        error = count("cachewatch_store_healthy", 0.0)()
        if error:
            print(f"FAIL: during the outage: {error}")
            return 1

        # --- PostgreSQL back: the alert resolves -----------------------------
        cwtest.log("starting PostgreSQL again")
        pg.start()
        settle(deadline, "every daemon reporting its store healthy",
               count("cachewatch_store_healthy", 1.0), 30)

        def unhealthy_resolved():
            alerts = [a for a in store_alerts(prom)
                      if a["labels"]["alertname"] == STORE_ALERTS[0]]
            return f"still active: {alerts}" if alerts else None

        settle(deadline, f"{STORE_ALERTS[0]} resolved", unhealthy_resolved,
               30)
        failed = False
        print(f"PASS ({time.monotonic() - started:.1f} s)")
        return 0
    except (AssertionError, TimeoutError, RuntimeError) as error:
        print(f"FAIL: {error}")
        return 1
    finally:
        procs.close(failed)


if __name__ == "__main__":
    sys.exit(main())
