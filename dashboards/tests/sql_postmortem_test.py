#!/usr/bin/env python3
"""Runs every postmortem query of dashboards/sql/ against a store that the
real cachewatchd filled from `cachewatch simulate`, binding its named
parameters, and checks its rows against what the store holds (computed
independently here) and its columns against its header comment.

The daemon is stopped (SIGTERM, exit 0) before the store is read, so every
acknowledged record is in it. With the sqlite3 shell installed, the
`.param set` usage shown in docs/DASHBOARDS.md is exercised too.
"""

import collections
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cwtest  # noqa: E402

COLUMNS = {
    "top_reasons_per_agent.sql": [
        "agent", "reason_rank", "primary_reason", "breaks",
        "share_of_agent_breaks", "tokens_lost", "avg_tokens_lost",
        "estimated_extra_cost_usd", "first_break", "last_break"],
    "sessions_most_tokens_lost.sql": [
        "agent", "session_id", "lanes", "breaks", "tokens_lost",
        "estimated_extra_cost_usd", "top_reason", "top_reason_tokens_lost",
        "turns", "hit_ratio", "first_break", "last_break"],
    "tools_schema_changes.sql": [
        "tool", "changes", "as_primary_reason", "agents", "sessions",
        "tokens_lost_in_these_breaks", "last_change"],
    "order_flips_by_mcp_server.sql": [
        "mcp_server", "breaks", "as_primary_reason", "tool_moves",
        "distinct_tools", "tokens_lost_in_these_breaks", "last_flip"],
    "ttl_gap_distribution.sql": [
        "ttl_seconds", "gap_bucket", "bucket_start_s", "bucket_end_s",
        "breaks", "share_of_ttl_breaks", "tokens_lost", "min_gap_s",
        "max_gap_s", "avg_over_ttl_s"],
    "lane_story.sql": [
        "turn_offset", "request_time", "gap_s", "request_id", "model",
        "tool_count", "changed", "expected_drop", "prompt_total_tokens",
        "cache_read_tokens", "cache_write_tokens", "hit_ratio", "verdict",
        "primary_reason", "missed_tokens", "break_id", "is_this_break"],
}
REASONS = {
    "model_changed", "cache_control_changed", "request_options_changed",
    "tools_order_changed", "tools_schema_changed", "tools_added",
    "tools_removed", "system_changed", "messages_changed",
    "breakpoint_lookback_exceeded", "ttl_expired", "likely_provider_eviction",
    "unknown"}
ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


class Failures:
    def __init__(self):
        self.messages = []
        self.checked = 0

    def expect(self, condition, message):
        self.checked += 1
        if not condition:
            self.messages.append(message)
        return condition


def header_and_body(text):
    header, body, in_header = [], [], True
    for line in text.splitlines():
        if in_header and line.startswith("--"):
            header.append(line[2:].strip())
        else:
            in_header = False
            body.append(line)
    return "\n".join(header), "\n".join(body)


def named_parameters(body):
    stripped = re.sub(r"'(?:[^']|'')*'", "''", body)
    stripped = re.sub(r"--[^\n]*", "", stripped)
    return set(re.findall(r"(?<![:\w]):([A-Za-z_]\w*)", stripped))


class Runner:
    def __init__(self, sql_dir, db, failures):
        self.sql_dir = sql_dir
        self.db = db
        self.f = failures
        self.texts = {}

    def text(self, name):
        if name not in self.texts:
            with open(os.path.join(self.sql_dir, name), encoding="utf-8") as fh:
                self.texts[name] = fh.read()
        return self.texts[name]

    def run(self, name, **params):
        """Rows (as dicts) of one file with the given parameters bound; every
        parameter the file uses and the caller did not give is NULL."""
        _, body = header_and_body(self.text(name))
        bound = {p: None for p in named_parameters(body)}
        unknown = set(params) - set(bound)
        self.f.expect(not unknown, f"{name}: no parameters {unknown}")
        bound.update(params)
        cursor = self.db.execute(self.text(name), bound)
        columns = [d[0] for d in cursor.description]
        self.f.expect(columns == COLUMNS[name],
                      f"{name}: columns {columns}, expected {COLUMNS[name]}")
        return [dict(zip(columns, row)) for row in cursor.fetchall()]


def check_headers(runner, failures):
    for name in sorted(COLUMNS):
        text = runner.text(name)
        failures.expect(text.startswith("-- Question:"),
                        f"{name}: must start with '-- Question:'")
        header, body = header_and_body(text)
        failures.expect("Parameters" in header,
                        f"{name}: header does not list its parameters")
        for param in named_parameters(body):
            failures.expect(f":{param}" in header,
                            f"{name}: parameter :{param} not documented")
        for column in COLUMNS[name]:
            failures.expect(re.search(rf"\b{column}\b", header),
                            f"{name}: column {column} not documented")
        failures.expect(body.strip().endswith(";") and
                        body.count(";") == 1,
                        f"{name}: must be exactly one statement")


def check_top_reasons(r, db, f):
    name = "top_reasons_per_agent.sql"
    truth = collections.Counter()
    tokens = collections.Counter()
    for agent, reason, missed in db.execute(
            "SELECT agent, primary_reason, missed_tokens"
            " FROM prompt_cache_breaks"):
        truth[(agent, reason)] += 1
        tokens[(agent, reason)] += missed or 0
    rows = r.run(name, since_us=0, top=100)
    f.expect(rows, f"{name}: no rows")
    f.expect({(x["agent"], x["primary_reason"]): x["breaks"] for x in rows}
             == dict(truth), f"{name}: breaks per agent and reason differ"
             " from prompt_cache_breaks")
    f.expect(all(x["tokens_lost"] == tokens[(x["agent"], x["primary_reason"])]
                 for x in rows), f"{name}: tokens_lost differ")
    f.expect({x["agent"] for x in rows} == set(cwtest.AGENTS),
             f"{name}: agents {sorted({x['agent'] for x in rows})}")
    for agent in cwtest.AGENTS:
        mine = [x for x in rows if x["agent"] == agent]
        f.expect([x["reason_rank"] for x in mine] ==
                 list(range(1, len(mine) + 1)),
                 f"{name}: ranks of {agent} are not 1..n")
        f.expect([x["breaks"] for x in mine] ==
                 sorted((x["breaks"] for x in mine), reverse=True),
                 f"{name}: {agent} not ordered by breaks")
        f.expect(abs(sum(x["share_of_agent_breaks"] for x in mine) - 1) < 1e-3,
                 f"{name}: shares of {agent} do not add up to 1")
    f.expect(all(x["primary_reason"] in REASONS for x in rows),
             f"{name}: unknown reason")
    f.expect(all(ISO.match(x["first_break"]) and ISO.match(x["last_break"])
                 and x["first_break"] <= x["last_break"] for x in rows),
             f"{name}: first_break/last_break")
    f.expect(any(x["estimated_extra_cost_usd"] for x in rows),
             f"{name}: no estimated cost (prices were configured)")
    top1 = r.run(name, since_us=0, top=1)
    f.expect(len(top1) == len(cwtest.AGENTS) and
             all(x["reason_rank"] == 1 for x in top1),
             f"{name}: :top=1 gives {len(top1)} rows")
    one = r.run(name, since_us=0, agent="my-agent")
    f.expect(one and {x["agent"] for x in one} == {"my-agent"}
             and len(one) <= 5, f"{name}: :agent filter / default :top")
    defaults = r.run(name)  # the simulation's turns are < 11 h old
    f.expect(defaults == r.run(name, since_us=0, top=5),
             f"{name}: the default window (24 h) misses recent breaks")
    f.expect(r.run(name, since_us=0, until_us=1) == [],
             f"{name}: :until_us does not bound the window")


def check_sessions(r, db, f):
    name = "sessions_most_tokens_lost.sql"
    truth = collections.Counter()
    for agent, session, missed in db.execute(
            "SELECT agent, session_id, missed_tokens FROM prompt_cache_breaks"):
        truth[(agent, session)] += missed or 0
    rows = r.run(name, since_us=0, limit=1000)
    f.expect(rows, f"{name}: no rows")
    f.expect({(x["agent"], x["session_id"]): x["tokens_lost"] for x in rows}
             == dict(truth), f"{name}: tokens per session differ")
    f.expect([x["tokens_lost"] for x in rows] ==
             sorted((x["tokens_lost"] for x in rows), reverse=True),
             f"{name}: not ordered by tokens_lost")
    for x in rows:
        f.expect(x["top_reason"] in REASONS and
                 0 < x["top_reason_tokens_lost"] <= x["tokens_lost"] or
                 x["tokens_lost"] == 0, f"{name}: top reason of {x}")
        f.expect(x["turns"] > 0 and x["hit_ratio"] is not None and
                 0 <= x["hit_ratio"] <= 1, f"{name}: turns/hit_ratio of {x}")
        f.expect(1 <= x["lanes"] <= 2, f"{name}: lanes of {x}")
    f.expect(len(r.run(name, since_us=0, limit=3)) == 3,
             f"{name}: :limit=3")
    f.expect(len(r.run(name)) == min(20, len(rows)),
             f"{name}: default :limit 20")


def check_tools_schema(r, db, f):
    name = "tools_schema_changes.sql"
    truth = collections.Counter()
    for (names,) in db.execute(
            "SELECT schema_changed_tool_names FROM prompt_cache_breaks"):
        for tool in json.loads(names or "[]"):
            truth[tool] += 1
    rows = r.run(name, since_us=0, limit=1000)
    f.expect(rows, f"{name}: no rows (the simulation edits schemas)")
    f.expect({x["tool"]: x["changes"] for x in rows} == dict(truth),
             f"{name}: changes per tool differ")
    f.expect([x["changes"] for x in rows] ==
             sorted((x["changes"] for x in rows), reverse=True),
             f"{name}: not ordered by changes")
    f.expect(all(0 <= x["as_primary_reason"] <= x["changes"] for x in rows),
             f"{name}: as_primary_reason")
    f.expect(sum(x["as_primary_reason"] for x in rows) > 0,
             f"{name}: no tools_schema_changed primary reason")
    f.expect(all(ISO.match(x["last_change"]) for x in rows),
             f"{name}: last_change")
    f.expect(len(r.run(name, since_us=0, limit=2)) == min(2, len(rows)),
             f"{name}: :limit")


def server_of(tool):
    if tool.startswith("mcp__"):
        end = tool.find("__", 5)
        if end > 5:
            return tool[5:end]
    return "(builtin)"


def check_order_flips(r, db, f):
    name = "order_flips_by_mcp_server.sql"
    breaks = collections.defaultdict(set)
    moves = collections.Counter()
    for break_id, names in db.execute(
            "SELECT break_id, reordered_tool_names FROM prompt_cache_breaks"):
        for tool in json.loads(names or "[]"):
            breaks[server_of(tool)].add(break_id)
            moves[server_of(tool)] += 1
    rows = r.run(name, since_us=0)
    f.expect(rows, f"{name}: no rows (the simulation reorders MCP servers)")
    f.expect({x["mcp_server"]: x["breaks"] for x in rows} ==
             {k: len(v) for k, v in breaks.items()},
             f"{name}: breaks per server differ: {rows}")
    f.expect({x["mcp_server"]: x["tool_moves"] for x in rows} == dict(moves),
             f"{name}: moves per server differ")
    f.expect(all("__" not in x["mcp_server"] for x in rows),
             f"{name}: server names still carry the mcp__ prefix")
    f.expect(any(x["mcp_server"] != "(builtin)" for x in rows),
             f"{name}: no MCP server")
    f.expect(all(x["as_primary_reason"] <= x["breaks"] and
                 x["distinct_tools"] <= x["tool_moves"] for x in rows),
             f"{name}: counts")
    f.expect(sum(x["as_primary_reason"] for x in rows) > 0,
             f"{name}: no tools_order_changed primary reason")
    f.expect(r.run(name, since_us=0, agent="nobody") == [],
             f"{name}: :agent filter")
    # The grouping itself, on names the simulation may not produce.
    probe = db.execute(
        "SELECT value, CASE WHEN value LIKE 'mcp\\_\\_%' ESCAPE '\\'"
        " AND instr(substr(value, 6), '__') > 1"
        " THEN substr(value, 6, instr(substr(value, 6), '__') - 1)"
        " ELSE '(builtin)' END FROM json_each(?)",
        (json.dumps(["mcp__github__search_issues", "mcp__my_db__query",
                     "Bash", "mcp__broken", "mcpx__a__b", "mcp____x"]),))
    for tool, server in probe:
        f.expect(server == server_of(tool),
                 f"{name}: {tool} grouped as {server}")
    f.expect("mcp\\_\\_%' ESCAPE '\\'" in r.text(name),
             f"{name}: the probe above no longer matches the file's CASE")


def check_ttl_gaps(r, db, f):
    name = "ttl_gap_distribution.sql"
    truth = collections.Counter(
        ttl for (ttl,) in db.execute(
            "SELECT ttl_seconds FROM prompt_cache_breaks"
            " WHERE primary_reason = 'ttl_expired'"))
    rows = r.run(name, since_us=0)
    f.expect(rows, f"{name}: no rows (the simulation idles past the TTL)")
    by_ttl = collections.defaultdict(list)
    for x in rows:
        by_ttl[x["ttl_seconds"]].append(x)
    f.expect({t: sum(x["breaks"] for x in v) for t, v in by_ttl.items()} ==
             dict(truth), f"{name}: breaks per TTL differ")
    for ttl, buckets in by_ttl.items():
        f.expect(len(buckets) == 8, f"{name}: {len(buckets)} buckets")
        f.expect(abs(sum(x["share_of_ttl_breaks"] for x in buckets) - 1)
                 < 1e-3, f"{name}: shares for TTL {ttl}")
        for x in buckets:
            # ttl_expired means the gap exceeded the TTL.
            if x["bucket_end_s"] is not None and ttl and \
                    x["bucket_end_s"] <= ttl:
                f.expect(x["breaks"] == 0,
                         f"{name}: gap below the TTL in {x}")
            if x["breaks"]:
                f.expect(x["bucket_start_s"] <= x["min_gap_s"] and
                         (x["bucket_end_s"] is None or
                          x["max_gap_s"] < x["bucket_end_s"] + 0.1) and
                         x["avg_over_ttl_s"] > 0, f"{name}: bucket {x}")
            else:
                f.expect(x["min_gap_s"] is None and x["tokens_lost"] == 0,
                         f"{name}: empty bucket {x}")


def check_lane_story(r, db, f):
    name = "lane_story.sql"
    stories = 0
    for reason, change in (("tools_order_changed", "tools"),
                           ("model_changed", "model"),
                           ("ttl_expired", "")):
        row = db.execute(
            "SELECT break_id, agent, session_id, lane, request_id,"
            " previous_request_id FROM prompt_cache_breaks"
            " WHERE primary_reason = ? ORDER BY request_time_us LIMIT 1",
            (reason,)).fetchone()
        if row is None:
            f.expect(reason != "tools_order_changed",
                     f"{name}: no {reason} break to tell")
            continue
        stories += 1
        break_id, agent, session, lane, request_id, previous_id = row
        lane_ids = {rid for (rid,) in db.execute(
            "SELECT request_id FROM turns WHERE agent = ? AND session_id = ?"
            " AND lane = ?", (agent, session, lane))}
        rows = r.run(name, break_id=break_id)
        f.expect(rows, f"{name}: no rows for {break_id}")
        offsets = [x["turn_offset"] for x in rows]
        f.expect(offsets == sorted(set(offsets)), f"{name}: offsets {offsets}")
        f.expect(all(x["request_id"] in lane_ids for x in rows),
                 f"{name}: a turn from another lane")
        this = [x for x in rows if x["is_this_break"]]
        f.expect(len(this) == 1 and this[0]["turn_offset"] == 0 and
                 this[0]["break_id"] == break_id and
                 this[0]["request_id"] == request_id and
                 this[0]["verdict"] == "break" and
                 this[0]["primary_reason"] == reason,
                 f"{name}: the break's own turn: {this}")
        if this:
            f.expect(change in (this[0]["changed"] or ""),
                     f"{name}: {reason} break shows changed="
                     f"{this[0]['changed']!r}")
            if reason == "ttl_expired":
                f.expect(this[0]["changed"] == "" and this[0]["gap_s"] > 300,
                         f"{name}: ttl_expired turn {this[0]}")
        before = [x for x in rows if x["turn_offset"] == -1]
        f.expect(before and before[0]["request_id"] == previous_id,
                 f"{name}: turn -1 is not the compared turn {previous_id}")
        f.expect(all(ISO.match(x["request_time"]) for x in rows),
                 f"{name}: request_time")
        f.expect(all(x["hit_ratio"] is None or 0 <= x["hit_ratio"] <= 1
                     for x in rows), f"{name}: hit_ratio")
        narrow = r.run(name, break_id=break_id, turns=2, minutes=0)
        f.expect(narrow and all(-2 <= x["turn_offset"] <= 2 for x in narrow)
                 and 0 in [x["turn_offset"] for x in narrow],
                 f"{name}: :turns=2 :minutes=0 gives"
                 f" {[x['turn_offset'] for x in narrow]}")
        wide = r.run(name, break_id=break_id, turns=0, minutes=100000)
        f.expect(len(wide) == len(lane_ids), f"{name}: :minutes covers the"
                 f" lane: {len(wide)} of {len(lane_ids)} turns")
    f.expect(stories > 0, f"{name}: no story told")
    f.expect(r.run(name, break_id="no-such-break") == [],
             f"{name}: unknown break")


def check_sqlite3_shell(sql_dir, db_path, f):
    """The usage shown in docs/DASHBOARDS.md: sqlite3 with .param set."""
    shell = shutil.which("sqlite3")
    if not shell:
        print("note: sqlite3 shell not installed; .param usage not checked")
        return
    with open(os.path.join(sql_dir, "top_reasons_per_agent.sql"),
              encoding="utf-8") as fh:
        sql = fh.read()
    result = subprocess.run(
        [shell, "-readonly", "-cmd", ".param set :agent 'claude-code'",
         "-cmd", ".param set :top 2", "-separator", "|", db_path],
        input=sql, capture_output=True, text=True, timeout=20, check=False)
    lines = result.stdout.strip().splitlines()
    f.expect(result.returncode == 0 and result.stderr == "" and
             len(lines) == 2 and
             all(line.startswith("claude-code|") for line in lines),
             f"sqlite3 shell: rc {result.returncode}, {result.stderr!r},"
             f" {lines}")
    with open(os.path.join(sql_dir, "lane_story.sql"), encoding="utf-8") as fh:
        sql = fh.read()
    break_id = sqlite3.connect(db_path).execute(
        "SELECT break_id FROM prompt_cache_breaks LIMIT 1").fetchone()[0]
    result = subprocess.run(
        [shell, "-readonly", "-cmd", f".param set :break_id '{break_id}'",
         "-header", "-csv", db_path],
        input=sql, capture_output=True, text=True, timeout=20, check=False)
    lines = result.stdout.strip().splitlines()
    f.expect(result.returncode == 0 and len(lines) >= 2 and
             lines[0].startswith("turn_offset,") and break_id in result.stdout,
             f"sqlite3 shell lane_story: rc {result.returncode},"
             f" {result.stderr!r}")


def main():
    args = cwtest.common_args(__doc__.splitlines()[0]).parse_args()
    sql_dir = os.path.join(args.dashboards, "sql")
    procs = cwtest.Processes("cachewatch-dash-sql-")
    failed = True
    try:
        db_path = os.path.join(procs.tmp, "cachewatch.db")
        daemon, grpc, _ = cwtest.start_daemon(procs, args.cachewatchd,
                                              db_path)
        print(cwtest.simulate(args.cachewatch, grpc, seed=3, tag="dash-sql"))
        status = daemon.stop(grace=15)
        if status != 0:
            print(f"FAIL: cachewatchd exited with {status} on SIGTERM")
            return 1

        db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        breaks = db.execute("SELECT COUNT(*) FROM prompt_cache_breaks")\
            .fetchone()[0]
        reasons = dict(db.execute(
            "SELECT primary_reason, COUNT(*) FROM prompt_cache_breaks"
            " GROUP BY 1").fetchall())
        cwtest.log(f"store: {breaks} breaks, by reason {reasons}")
        f = Failures()
        for reason in cwtest.SIM_REASONS:
            f.expect(reasons.get(reason), f"the simulation left no {reason}"
                     " break in the store")
        runner = Runner(sql_dir, db, f)
        present = sorted(n for n in os.listdir(sql_dir)
                         if n.endswith(".sql") and not n.endswith(".pg.sql"))
        f.expect(present == sorted(COLUMNS),
                 f"SQL files {present}, expected {sorted(COLUMNS)}")
        check_headers(runner, f)
        check_top_reasons(runner, db, f)
        check_sessions(runner, db, f)
        check_tools_schema(runner, db, f)
        check_order_flips(runner, db, f)
        check_ttl_gaps(runner, db, f)
        check_lane_story(runner, db, f)
        check_sqlite3_shell(sql_dir, db_path, f)
        db.close()
        for message in f.messages:
            print("FAIL:", message)
        if f.messages:
            return 1
        failed = False
        print(f"PASS: {len(present)} SQL files, {f.checked} checks")
        return 0
    finally:
        procs.close(failed)


if __name__ == "__main__":
    sys.exit(main())
