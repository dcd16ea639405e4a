#!/usr/bin/env bash
# Runs the tests under sanitizers, as CI does (docs/OPERATIONS.md, "How the
# guarantees are tested"):
#   asan  every CTest test, with the project's code built with
#         -fsanitize=address,undefined in build-asan (leaks included) —
#         but for the million-lanes memory test, whose daemon must be the
#         uninstrumented one (ASan's allocator and quarantine would be what
#         it measures): that test runs last, against $BUILD/daemon/cachewatchd
#         (BUILD defaults to build; only that target is built there).
#   tsan  the concurrent parts: lane trackers and ingest pipeline
#         (pipeline_test), exporters (exporter_test, break_hub_test), store
#         (store_test), reporter (reporter_test),
#         built with -fsanitize=thread in build-tsan.
# Any sanitizer report fails the run. Debian's libraries (gRPC, protobuf,
# abseil, SQLite) are not instrumented; scripts/sanitizers/*.supp lists the
# reports that come from inside them.
#
# Usage: scripts/run-sanitizers.sh [asan|tsan|all]   (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
SUPP="$PWD/scripts/sanitizers"
which=${1:-all}
memory_test=OverloadTest.MillionDistinctLanesKeepMemoryBounded

configure() {  # configure <dir> <sanitizers> [cmake args...]
  local dir=$1 sanitize=$2
  shift 2
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCACHEWATCH_BUILD_BENCH=OFF -DCACHEWATCH_SANITIZE="$sanitize" \
    -DCACHEWATCH_WERROR=ON "$@" \
    >/dev/null
}

run_asan() {
  configure build-asan address,undefined
  cmake --build build-asan -j"$JOBS"
  ASAN_OPTIONS="detect_leaks=1:detect_stack_use_after_return=0" \
  LSAN_OPTIONS="suppressions=$SUPP/lsan.supp:print_suppressions=0" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    ctest --test-dir build-asan --output-on-failure -j"$JOBS" \
    -E "$memory_test"
  local build=${BUILD:-build}
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$build" -j"$JOBS" --target cachewatchd
  CACHEWATCHD="$PWD/$build/daemon/cachewatchd" \
    ctest --test-dir build-asan --output-on-failure -R "$memory_test"
}

run_tsan() {
  configure build-tsan thread
  local tests=(daemon/pipeline/pipeline_test daemon/store/sqlite/store_test
    daemon/store/postgres/store_postgres_test
    daemon/exporter/exporter_test daemon/exporter/watch/break_hub_test
    client/reporter_test daemon/receiver/proxy/proxy_observe_test)
  cmake --build build-tsan -j"$JOBS" --target "${tests[@]##*/}"
  # The reporter's peer is the uninstrumented daemon: TSan checks the client
  # here, and Debian's gRPC is not instrumented, so a TSan daemon reports the
  # header-inlined gRPC callback code it runs (the daemon's own concurrency
  # is checked by the pipeline, store and exporter tests above).
  local build=${BUILD:-build}
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$build" -j"$JOBS" --target cachewatchd
  for test in "${tests[@]}"; do
    echo "== tsan: $test"
    CACHEWATCHD="$PWD/$build/daemon/cachewatchd" \
    TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$SUPP/tsan.supp" \
      "build-tsan/$test"
  done
}

case "$which" in
  asan) run_asan ;;
  tsan) run_tsan ;;
  all)  # Not `run_asan && run_tsan`: on the left of && a function runs
        # without set -e, and a failing step inside would go unnoticed.
    run_asan
    run_tsan
    ;;
  *) echo "usage: $0 [asan|tsan|all]" >&2; exit 2 ;;
esac
