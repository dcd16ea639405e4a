#!/usr/bin/env bash
# Runs the tests under sanitizers, as CI does (docs/OPERATIONS.md, "How the
# guarantees are tested"):
#   asan  every CTest test, with the project's code built with
#         -fsanitize=address,undefined in build-asan (leaks included) —
#         but for the million-lanes memory test, whose daemon must be the
#         uninstrumented one (ASan's allocator and quarantine would be what
#         it measures): in the same CTest run, that test's daemon is
#         $BUILD/daemon/cachewatchd (tests/memory_test_daemon.cmake), which
#         the ctest cachewatchd_links_tcmalloc also checks runs on tcmalloc.
#   tsan  the concurrent parts: lane trackers and ingest pipeline
#         (pipeline_test), exporters (exporter_test, break_hub_test), store
#         (store_test), reporter (reporter_test),
#         built with -fsanitize=thread in build-tsan; JOBS of them run
#         at a time, each one's output printed after all have ended.
# The uninstrumented daemon: BUILD (default build) is configured as
# RelWithDebInfo if it is not configured yet, and only cachewatchd is built
# there; `make test` passes BUILD=build-relwithdebinfo, the clean -Werror
# build scripts/build-configs.sh made just before, so nothing is compiled
# twice.
# Both are unity builds (cmake/Unity.cmake): every file is still compiled on
# its own, with -Werror, by scripts/build-configs.sh.
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
plain=${BUILD:-build}

configure() {  # configure <dir> <sanitizers> [cmake args...]
  local dir=$1 sanitize=$2
  shift 2
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCACHEWATCH_BUILD_BENCH=OFF -DCACHEWATCH_SANITIZE="$sanitize" \
    -DCACHEWATCH_WERROR=ON -DCMAKE_UNITY_BUILD=ON "$@" \
    >/dev/null
}

plain_daemon() {  # builds the uninstrumented cachewatchd in $BUILD
  cmake -S . -B "$plain" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$plain" -j"$JOBS" --target cachewatchd
}

run_asan() {
  # With the benchmarks' directory: its query_bench test runs every
  # postmortem query (bench/CMakeLists.txt); no benchmark is built.
  configure build-asan address,undefined -DCACHEWATCH_BUILD_BENCH=ON
  cmake --build build-asan -j"$JOBS"
  plain_daemon
  CACHEWATCH_MEMORY_TEST_DAEMON="$PWD/$plain/daemon/cachewatchd" \
  ASAN_OPTIONS="detect_leaks=1:detect_stack_use_after_return=0" \
  LSAN_OPTIONS="suppressions=$SUPP/lsan.supp:print_suppressions=0" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    ctest --test-dir build-asan --output-on-failure -j"$JOBS"
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
  plain_daemon
  # JOBS tests at a time (like CTest -j in the ASan run); each one's output
  # goes to its own file and is printed in the list's order once all ended.
  local logs=build-tsan/test-logs test name failed=0
  rm -rf "$logs"
  mkdir -p "$logs"
  for test in "${tests[@]}"; do
    while (($(jobs -rp | wc -l) >= JOBS)); do wait -n || true; done
    name=${test##*/}
    (
      set +e
      CACHEWATCHD="$PWD/$plain/daemon/cachewatchd" \
      TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$SUPP/tsan.supp" \
        "build-tsan/$test" >"$logs/$name.log" 2>&1
      echo $? >"$logs/$name.rc"
    ) &
  done
  wait
  for test in "${tests[@]}"; do
    name=${test##*/}
    echo "== tsan: $test"
    cat "$logs/$name.log"
    if [[ $(cat "$logs/$name.rc") != 0 ]]; then
      echo "== tsan: $test FAILED (exit status $(cat "$logs/$name.rc"))"
      failed=1
    fi
  done
  return "$failed"
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
