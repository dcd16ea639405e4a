#!/usr/bin/env python3
"""Static checks of the Grafana dashboards and their provisioning files.

Each dashboard JSON must: parse; be a classic dashboard model without
`__inputs` (importable by hand and provisionable from files alike); have a
fixed, unique `uid` and a null `id`; have schemaVersion >= 36; declare a
template variable of type `datasource` whose query is `prometheus`; and
reference that variable (`${datasource}` or `$datasource`) as the datasource
uid of every panel and target that names one, never a hard-coded uid. Every
panel has a unique id and a grid position; every data panel has at least one
PromQL target; every `$variable` an expression uses is one of the
dashboard's variables or a Grafana built-in; query variables use the
datasource variable too.
"""

import argparse
import json
import os
import re
import sys

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import promql  # noqa: E402

ALLOWED_UIDS = {"${datasource}", "$datasource"}
NO_QUERY_PANELS = {"row", "text"}


def check_dashboard(name, dashboard, errors):
    def error(message):
        errors.append(f"{name}: {message}")

    if "__inputs" in dashboard or "__requires" in dashboard:
        error("has __inputs/__requires (an export for sharing, not a"
              " provisionable dashboard)")
    uid = dashboard.get("uid")
    if not isinstance(uid, str) or not re.fullmatch(r"[A-Za-z0-9_-]{1,40}",
                                                    uid or ""):
        error(f"uid must be a fixed string of at most 40 characters: {uid!r}")
    if dashboard.get("id") is not None:
        error("id must be null (Grafana assigns it)")
    version = dashboard.get("schemaVersion")
    if not isinstance(version, int) or version < 36:
        error(f"schemaVersion {version!r} < 36")
    if not dashboard.get("title"):
        error("no title")

    variables = promql.variables(dashboard)
    names = [v.get("name") for v in variables]
    if len(names) != len(set(names)):
        error(f"duplicate variable names: {names}")
    datasource_vars = [v for v in variables if v.get("type") == "datasource"]
    if not datasource_vars:
        error("no template variable of type datasource")
    for v in datasource_vars:
        if v.get("query") != "prometheus":
            error(f"datasource variable {v.get('name')} query is"
                  f" {v.get('query')!r}, not 'prometheus'")
        if v.get("name") != "datasource":
            error("the datasource variable must be called 'datasource'")
    for v in variables:
        if v.get("type") == "query":
            check_datasource(v.get("datasource"), f"variable ${v.get('name')}",
                             error, required=True)
            query = promql.variable_query(v)
            if not query.startswith("label_values("):
                error(f"variable ${v.get('name')}: expected a label_values()"
                      f" query, got {query!r}")
            check_variables(query, names, f"variable ${v.get('name')}", error)

    ids = set()
    queries = 0
    for panel in promql.all_panels(dashboard):
        title = panel.get("title", "?")
        where = f"panel {title!r}"
        panel_id = panel.get("id")
        if not isinstance(panel_id, int) or panel_id in ids:
            error(f"{where}: missing or duplicate id {panel_id!r}")
        ids.add(panel_id)
        grid = panel.get("gridPos") or {}
        if not all(isinstance(grid.get(k), int) for k in "xywh"):
            error(f"{where}: gridPos {grid!r}")
        elif grid["x"] + grid["w"] > 24:
            error(f"{where}: wider than the 24-column grid")
        kind = panel.get("type")
        if kind not in NO_QUERY_PANELS:
            check_datasource(panel.get("datasource"), where, error,
                             required=True)
            targets = panel.get("targets") or []
            if not targets:
                error(f"{where}: no targets")
            ref_ids = [t.get("refId") for t in targets]
            if len(ref_ids) != len(set(ref_ids)):
                error(f"{where}: duplicate refIds {ref_ids}")
            for target in targets:
                twhere = f"{where} target {target.get('refId')}"
                check_datasource(target.get("datasource"), twhere, error,
                                 required=True)
                expr = target.get("expr")
                if not expr or not expr.strip():
                    error(f"{twhere}: no PromQL expression")
                    continue
                queries += 1
                check_variables(expr, names, twhere, error)
        elif panel.get("datasource") is not None:
            check_datasource(panel.get("datasource"), where, error,
                             required=False)
    if queries == 0:
        error("no queries at all")
    return queries


def check_datasource(datasource, where, error, required):
    if datasource is None:
        if required:
            error(f"{where}: no datasource (must be ${{datasource}})")
        return
    if isinstance(datasource, str):
        if datasource not in ALLOWED_UIDS:
            error(f"{where}: datasource {datasource!r}")
        return
    uid = datasource.get("uid")
    if uid not in ALLOWED_UIDS:
        error(f"{where}: datasource uid {uid!r} (must be ${{datasource}})")
    if datasource.get("type") not in (None, "prometheus"):
        error(f"{where}: datasource type {datasource.get('type')!r}")


def check_variables(expr, names, where, error):
    for variable in promql.used_variables(expr):
        if variable not in names and variable not in promql.GRAFANA_BUILTINS:
            error(f"{where}: unknown variable ${variable}")
        if variable == "datasource":
            error(f"{where}: $datasource inside an expression")


def check_provisioning(directory, errors):
    """The provisioning examples point at the folder and a Prometheus (no
    YAML parser in the standard library: checked as text)."""
    path = os.path.join(directory, "provisioning", "dashboards.yaml")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for needle in ("apiVersion: 1", "providers:", "type: file", "path:"):
            if needle not in text:
                errors.append(f"{path}: missing {needle!r}")
    except OSError as exc:
        errors.append(f"{path}: {exc}")
    path = os.path.join(directory, "provisioning", "datasources.yaml")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for needle in ("apiVersion: 1", "datasources:", "type: prometheus",
                       "url:"):
            if needle not in text:
                errors.append(f"{path}: missing {needle!r}")
    except OSError as exc:
        errors.append(f"{path}: {exc}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dashboards", required=True,
                        help="the dashboards/ source directory")
    args = parser.parse_args()
    grafana = os.path.join(args.dashboards, "grafana")
    errors = []
    uids = {}
    expected = {"prompt-cache-overview.json", "daemon-health.json"}
    present = {n for n in os.listdir(grafana) if n.endswith(".json")}
    for missing in sorted(expected - present):
        errors.append(f"{missing}: missing")
    total = 0
    for name in sorted(present):
        path = os.path.join(grafana, name)
        try:
            with open(path, encoding="utf-8") as f:
                dashboard = json.load(f)
        except (OSError, ValueError) as exc:
            errors.append(f"{name}: does not parse: {exc}")
            continue
        if not isinstance(dashboard, dict) or "dashboard" in dashboard:
            errors.append(f"{name}: not a classic dashboard model (no"
                          " wrapping object)")
            continue
        total += check_dashboard(name, dashboard, errors)
        uid = dashboard.get("uid")
        if uid in uids:
            errors.append(f"{name}: uid {uid!r} also used by {uids[uid]}")
        uids[uid] = name
    check_provisioning(grafana, errors)
    for message in errors:
        print("FAIL:", message)
    if errors:
        return 1
    print(f"PASS: {len(present)} dashboards, {total} queries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
