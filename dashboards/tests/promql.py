"""Just enough PromQL and dashboard handling for the dashboards tests.

- The PromQL expressions of the Grafana dashboards (every target of every
  panel, rows included) and their template variables.
- Grafana variable substitution for evaluating a dashboard query directly
  against Prometheus.
- Splitting an alert expression into the operands of its top-level
  comparisons and set operators (`and`, `or`, `unless`), recursively through
  parentheses, so that each side can be evaluated on its own: an alert that
  is not firing returns nothing, but each of its sides must.
"""

import json
import os
import re

GRAFANA_BUILTINS = {
    "__rate_interval": "1m",
    "__range": "5m",
    "__interval": "15s",
}
_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\[\[(\w+)(?::\w+)?\]\]|\$(\w+)")


def load_dashboards(directory):
    """{file name: parsed JSON} of every dashboard JSON in `directory`."""
    dashboards = {}
    for name in sorted(os.listdir(directory)):
        if name.endswith(".json"):
            with open(os.path.join(directory, name), encoding="utf-8") as f:
                dashboards[name] = json.load(f)
    return dashboards


def all_panels(dashboard):
    """Every panel, including those nested in (collapsed) rows."""
    for panel in dashboard.get("panels", []):
        yield panel
        for inner in panel.get("panels", []) or []:
            yield inner


def panel_queries(dashboard):
    """(panel title, refId, expr) of every PromQL target."""
    for panel in all_panels(dashboard):
        for target in panel.get("targets", []) or []:
            expr = target.get("expr")
            if expr:
                yield panel.get("title", "?"), target.get("refId", "?"), expr


def variables(dashboard):
    return (dashboard.get("templating") or {}).get("list", []) or []


def variable_query(variable):
    query = variable.get("query")
    if isinstance(query, dict):
        query = query.get("query")
    return query or variable.get("definition") or ""


def substitute(expr, dashboard):
    """Replaces Grafana variables: the built-in intervals by fixed values,
    the dashboard's own query/custom variables by `.*` (they are used with
    regex matchers, `=~`, and "All" is `.*`)."""
    own = {v.get("name") for v in variables(dashboard)}

    def replace(match):
        name = match.group(1) or match.group(2) or match.group(3)
        if name in GRAFANA_BUILTINS:
            return GRAFANA_BUILTINS[name]
        if name in own:
            return ".*"
        raise ValueError(f"unknown variable ${name} in {expr!r}")

    return _VARIABLE.sub(replace, expr)


def used_variables(expr):
    return {m.group(1) or m.group(2) or m.group(3)
            for m in _VARIABLE.finditer(expr)}


# --- splitting ---------------------------------------------------------------

_COMPARISON = ("==", "!=", ">=", "<=", ">", "<")
_SET_OPS = ("and", "or", "unless")
_MODIFIERS = re.compile(
    r"^\s*(?:bool\b\s*)?"
    r"(?:(?:on|ignoring)\s*\([^)]*\)\s*)?"
    r"(?:(?:group_left|group_right)\s*(?:\([^)]*\))?\s*)?")
_NUMBER = re.compile(r"^\s*[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*$")


def _top_level_split(expr):
    """Splits at comparison and set operators outside (), [], {} and
    strings. Returns the operands (modifiers such as `on(...)` and `bool`
    removed), or [expr] when there is no such operator."""
    parts, depth, start, i = [], 0, 0, 0
    quote = None
    while i < len(expr):
        c = expr[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
            i += 1
            continue
        if c in "\"'`":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0:
            op = None
            for candidate in _COMPARISON:
                if expr.startswith(candidate, i):
                    op = candidate
                    break
            if op is None:
                word = re.match(r"[A-Za-z_:][A-Za-z0-9_:]*", expr[i:])
                if word and (i == 0 or not re.match(r"[A-Za-z0-9_:]",
                                                     expr[i - 1])):
                    if word.group(0) in _SET_OPS:
                        op = word.group(0)
                    else:
                        i += len(word.group(0))
                        continue
            if op:
                parts.append(expr[start:i])
                i += len(op)
                start = i
                continue
        i += 1
    parts.append(expr[start:])
    if len(parts) == 1:
        return [expr]
    return [_MODIFIERS.sub("", part, count=1) for part in parts]


def _strip_outer_parens(expr):
    expr = expr.strip()
    while expr.startswith("(") and expr.endswith(")"):
        depth = 0
        for i, c in enumerate(expr):
            depth += c == "("
            depth -= c == ")"
            if depth == 0 and i < len(expr) - 1:
                return expr  # "(a) + (b)": not one parenthesized group
        expr = expr[1:-1].strip()
    return expr


def operands(expr):
    """The leaf operands of `expr`'s comparisons and set operations, scalars
    left out. An expression without any is its own single operand."""
    expr = _strip_outer_parens(expr)
    parts = _top_level_split(expr)
    if len(parts) == 1:
        return [] if _NUMBER.match(expr) else [" ".join(expr.split())]
    leaves = []
    for part in parts:
        leaves.extend(operands(part))
    return leaves


def has_top_level_filter(expr):
    """True when the expression, after peeling parentheses, is a comparison
    or set operation (so it may legitimately return nothing)."""
    return len(_top_level_split(_strip_outer_parens(expr))) > 1


def metric_names(expr):
    """Metric names (and recorded series names) an expression selects."""
    cleaned = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    cleaned = re.sub(r"\{[^}]*\}", " ", cleaned)
    cleaned = re.sub(r"\[[^\]]*\]", " ", cleaned)
    # Grouping clauses list label names, not metrics.
    cleaned = re.sub(
        r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ",
        cleaned)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", cleaned):
        word = match.group(0)
        rest = cleaned[match.end():].lstrip()
        if rest.startswith("("):
            continue  # a function or aggregation
        if word in _SET_OPS or word in ("bool", "offset", "by", "without",
                                        "on", "ignoring", "inf", "nan"):
            continue
        if re.match(r"^\d", word):
            continue
        names.add(word)
    return names


def equality_matchers(expr):
    """(label, value) of every `label="value"` and `label!="value"` matcher:
    values a typo would silently turn into "no such series" (or, behind
    `or vector(0)` and `!=`, into a wrong number)."""
    found = set()
    for selector in re.findall(r"\{([^}]*)\}", expr):
        for label, value in re.findall(
                r'([A-Za-z_]\w*)\s*!?=(?!~)\s*"((?:[^"\\]|\\.)*)"', selector):
            found.add((label, value))
    return found
