#!/usr/bin/env python3
"""Every postmortem query of dashboards/sql/ gives the same rows on both
stores: the SQLite text (<name>.sql) on a SQLite store the real cachewatchd
filled from `cachewatch simulate`, and its PostgreSQL variant
(<name>.pg.sql, run by psql) on a PostgreSQL store holding the same rows.

The PostgreSQL server is started by the test (cwtest.Postgres). Its schema
comes from the real daemon (`cachewatchd --store postgresql://...` migrates
it); the SQLite store's rows are then copied into it verbatim, so both sides
hold the same records (tests/support and daemon/store/postgres's
conformance tests prove the two stores write the same columns for the same
records). A second daemon on PostgreSQL takes a simulation of its own and
every .pg.sql must run on that store too.

Skips (77) only where the PostgreSQL binaries are absent.
"""

import csv
import io
import os
import sqlite3
import sys

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cwtest  # noqa: E402
import sql_postmortem_test as postmortem  # noqa: E402

TABLES = {
    "tool_lists": "list_hash",
    "tool_list_entries": "list_hash, position",
    "turns": "id",
    "prompt_cache_breaks": "request_time_us, break_id",
}
BYTEA = {"message_chain", "event"}


def normalized(value):
    """A cell as both sides can agree on it: None, a number rounded to 6
    places, or text."""
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return round(float(value), 6)
    try:
        return round(float(value), 6)
    except ValueError:
        return value


def csv_cell(value):
    """A COPY csv field: NULL unquoted empty, text always quoted (so that
    an empty string stays one), numbers as they are."""
    if value is None:
        return ""
    if isinstance(value, (int, float)):
        return repr(value)
    return '"' + str(value).replace('"', '""') + '"'


def sqlite_rows(db, text, params):
    _, body = postmortem.header_and_body(text)
    bound = {p: None for p in postmortem.named_parameters(body)}
    bound.update(params)
    cursor = db.execute(text, bound)
    return [tuple(normalized(v) for v in row) for row in cursor.fetchall()]


def pg_rows(pg, database, path, params):
    out = pg.psql(database, file=path,
                  variables={k: str(v) for k, v in params.items()})
    reader = csv.reader(io.StringIO(out))
    next(reader, None)  # Header.
    return [tuple(normalized(None if v == "\\N" else v) for v in row)
            for row in reader]


def copy_store(db, pg, database):
    """Copies every row of the SQLite store into the PostgreSQL store."""
    for table, order in TABLES.items():
        columns = [r[1] for r in db.execute(f"PRAGMA table_info({table})")
                   if r[1] != "id"]
        lines = []
        count = 0
        for row in db.execute(f"SELECT {', '.join(columns)} FROM {table}"
                              f" ORDER BY {order}"):
            cells = []
            for column, value in zip(columns, row):
                if column in BYTEA and value is not None:
                    value = "\\x" + bytes(value).hex()
                cells.append(csv_cell(value))
            lines.append(",".join(cells) + "\n")
            count += 1
        pg.psql(database, sql=f"COPY {table} ({', '.join(columns)}) FROM"
                " STDIN WITH (FORMAT csv)", stdin="".join(lines))
        cwtest.log(f"copied {count} rows of {table}")


def parameter_sets(db):
    """The parameters each file is run with: defaults widened to the whole
    store, an agent filter, and for lane_story a break of each kind."""
    sets = {}
    everything = {"since_us": 0}
    for name in postmortem.COLUMNS:
        # {}: every default (the simulated records are of the last day).
        sets[name] = [{}, everything, {**everything, "agent": "claude-code"}]
    sets["top_reasons_per_agent.sql"].append({"since_us": 0, "top": 2})
    sets["sessions_most_tokens_lost.sql"].append({"since_us": 0, "limit": 3})
    stories = []
    for (break_id,) in db.execute(
            "SELECT min(break_id) FROM prompt_cache_breaks"
            " GROUP BY primary_reason ORDER BY 1"):
        stories.append({"break_id": break_id})
        stories.append({"break_id": break_id, "turns": 2, "minutes": 0})
    sets["lane_story.sql"] = stories
    return sets


def main():
    args = cwtest.common_args(__doc__.splitlines()[0]).parse_args()
    if not cwtest.postgres_available():
        print(f"SKIPPED: PostgreSQL 15 binaries not found in"
              f" {cwtest.PG_BINDIR}; install postgresql-15"
              " (scripts/install-deps.sh)")
        return 77
    sql_dir = os.path.join(args.dashboards, "sql")
    procs = cwtest.Processes("cachewatch-dash-both-")
    failed = True
    try:
        pg = procs.add(cwtest.Postgres(procs.tmp))
        for database in ("copy", "live"):
            pg.create_database(database)
        # The SQLite store, filled by the real daemon.
        db_path = os.path.join(procs.tmp, "cachewatch.db")
        daemon, grpc, _ = cwtest.start_daemon(procs, args.cachewatchd,
                                              db_path)
        cwtest.simulate(args.cachewatch, grpc, seed=3, tag="both")
        if daemon.stop(grace=15) != 0:
            print("FAIL: cachewatchd (SQLite) did not exit cleanly")
            return 1
        # The PostgreSQL stores: "copy" gets its schema from the daemon and
        # the SQLite rows; "live" a simulation through a daemon of its own.
        daemon, _, _ = cwtest.start_daemon(
            procs, args.cachewatchd, db_path,
            extra=[f"--store={pg.url('copy')}"])
        if daemon.stop(grace=15) != 0:
            print("FAIL: cachewatchd (PostgreSQL) did not exit cleanly")
            return 1
        daemon, grpc, _ = cwtest.start_daemon(
            procs, args.cachewatchd, db_path,
            extra=[f"--store={pg.url('live')}"])
        cwtest.simulate(args.cachewatch, grpc, seed=4, tag="live")
        if daemon.stop(grace=15) != 0:
            print("FAIL: cachewatchd (PostgreSQL, live) did not exit cleanly")
            return 1

        db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        copy_store(db, pg, "copy")
        f = postmortem.Failures()
        for name, param_sets in sorted(parameter_sets(db).items()):
            with open(os.path.join(sql_dir, name), encoding="utf-8") as fh:
                text = fh.read()
            pg_path = os.path.join(sql_dir, name[:-4] + ".pg.sql")
            f.expect(os.path.exists(pg_path), f"{name}: no .pg.sql variant")
            for params in param_sets:
                expected = sqlite_rows(db, text, params)
                actual = pg_rows(pg, "copy", pg_path, params)
                f.expect(expected, f"{name} {params}: no rows on SQLite")
                f.expect(actual == expected,
                         f"{name} {params}: PostgreSQL rows differ:\n"
                         f"  sqlite:   {expected[:3]}\n"
                         f"  postgres: {actual[:3]}")
            live = pg_rows(pg, "live", pg_path,
                           {"since_us": 0, **({"break_id": pg.psql(
                               "live", "SELECT min(break_id) FROM"
                               " prompt_cache_breaks").splitlines()[1]}
                               if name == "lane_story.sql" else {})})
            f.expect(live, f"{name}: no rows on the live PostgreSQL store")
        turns = pg.psql("live", "SELECT count(*) FROM turns").splitlines()[1]
        f.expect(int(turns) > 500, f"live PostgreSQL store: {turns} turns")
        db.close()
        for message in f.messages:
            print("FAIL:", message)
        if f.messages:
            return 1
        failed = False
        print(f"PASS: {len(postmortem.COLUMNS)} SQL files on both stores,"
              f" {f.checked} checks")
        return 0
    finally:
        procs.close(failed)


if __name__ == "__main__":
    sys.exit(main())
