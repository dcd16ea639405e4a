#!/usr/bin/env bash
# Builds and tests the Node client: npm ci (when node_modules is missing or
# older than package-lock.json), tsc, then node's built-in test runner.
# The Reporter tests start the daemon named by $CACHEWATCHD (CTest passes the
# one it built). Exits 77 (skipped) when node or npm is not installed.
# Argument: the directory under test/ whose tests to run (default: test/
# itself; `proxy` for the HTTP proxy's tests in test/proxy/).
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "SKIPPED: node/npm not installed (scripts/install-deps.sh)"
  exit 77
fi
if [[ -z "${CACHEWATCHD:-}" ]]; then
  echo "run-tests.sh: set CACHEWATCHD to the cachewatchd binary" >&2
  exit 2
fi

if [[ ! -f node_modules/.package-lock.json || package-lock.json -nt node_modules/.package-lock.json ]]; then
  npm ci --no-audit --no-fund
fi
rm -rf dist
npx --no-install tsc -p .
exec node --test dist/test/${1:+$1/}*.test.js
