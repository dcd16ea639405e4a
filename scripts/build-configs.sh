#!/usr/bin/env bash
# Compiles the tree in the build types CI does not otherwise build, from a
# clean build directory each, with the project's warnings as errors
# (-DCACHEWATCH_WERROR=ON):
#   RelWithDebInfo  -O2 -g1, the default development type; what a user
#                   builds (libraries, daemon, CLI, client; tests OFF), each
#                   file compiled on its own, as a user's build does.
#   Release         -O3, where GCC's optimizer reports warnings the other
#                   types do not; the same sources, as a unity build.
#   Debug           -O0 -g, the tests' sources too, without running them:
#                   the tests' targets one file at a time (every other
#                   build compiles them in unity batches, where a file
#                   missing an include can compile because an earlier file
#                   of its batch had it), everything else as a unity build.
# So every file of the tree is compiled on its own in one of them, with
# -Werror (cmake/Unity.cmake; docs/PERFORMANCE.md "CI time, round 4").
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
  local options
  case "$type" in
    RelWithDebInfo) options=(-DCACHEWATCH_BUILD_TESTS=OFF) ;;
    Release) options=(-DCACHEWATCH_BUILD_TESTS=OFF -DCMAKE_UNITY_BUILD=ON) ;;
    Debug)
      options=(-DCACHEWATCH_BUILD_TESTS=ON -DCMAKE_UNITY_BUILD=ON
        -DCACHEWATCH_UNITY_BUILD_TESTS=OFF)
      ;;
  esac
  echo "== build-configs: $type in $dir (clean, ${options[*]})"
  rm -rf "$dir"
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE="$type" -DCACHEWATCH_WERROR=ON \
    "${options[@]}" >/dev/null
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
