#!/usr/bin/env bash
# Compiles the tree in the build types CI does not otherwise build, from a
# clean build directory each, with the project's warnings as errors
# (-DCACHEWATCH_WERROR=ON): Debug (-O0 -g), RelWithDebInfo (-O2 -g, the
# default development type; the sanitizer builds use it too, but with
# sanitizer flags that change what GCC warns about) and Release (-O3, where
# GCC's optimizer reports warnings the other types do not). RelWithDebInfo
# and Release compile what a user builds (libraries, daemon, CLI, client;
# -DCACHEWATCH_BUILD_TESTS=OFF). Debug compiles the tests' sources too,
# without running them: the sanitizer builds compile them as unity builds
# (cmake/Unity.cmake), where a file missing an include can compile because
# an earlier file of its batch had it, so this is where every test file is
# compiled on its own (at -O0, the cheapest type: it was Release's -O3 until
# the CI time round of 2026-12-02, docs/PERFORMANCE.md "CI time, round 2").
# The suite runs in the sanitizer builds (scripts/run-sanitizers.sh).
# Benchmarks are not built (they are EXCLUDE_FROM_ALL).
#
# `make test` builds RelWithDebInfo first, and scripts/run-sanitizers.sh
# takes its uninstrumented daemon from it (BUILD=build-relwithdebinfo), then
# Debug and Release after the fuzzers.
#
# Usage: scripts/build-configs.sh [Debug|RelWithDebInfo|Release|all]...   (default: all)
# Environment: JOBS (default nproc), CONFIG_BUILD_PREFIX (default build-).
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
prefix=${CONFIG_BUILD_PREFIX:-build-}

build() {  # build <CMAKE_BUILD_TYPE>
  local type=$1 dir="${prefix}$(echo "$1" | tr '[:upper:]' '[:lower:]')"
  local tests=OFF
  [[ $type == Debug ]] && tests=ON
  echo "== build-configs: $type in $dir (clean, tests' sources: $tests)"
  rm -rf "$dir"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE="$type" -DCACHEWATCH_WERROR=ON \
    -DCACHEWATCH_BUILD_TESTS="$tests" >/dev/null
  cmake --build "$dir" -j"$JOBS"
}

types=()
for which in "${@:-all}"; do
  case "$which" in
    Debug | RelWithDebInfo | Release) types+=("$which") ;;
    all) types+=(Debug RelWithDebInfo Release) ;;
    *) echo "usage: $0 [Debug|RelWithDebInfo|Release|all]..." >&2; exit 2 ;;
  esac
done
for type in "${types[@]}"; do
  build "$type"
done
