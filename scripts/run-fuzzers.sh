#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang (AddressSanitizer and
# UndefinedBehaviorSanitizer on the whole tree) and runs each for a bounded
# time, as CI does (docs/OPERATIONS.md, "Fuzzing"; fuzz/README.md).
#
# Usage: scripts/run-fuzzers.sh [SECONDS_PER_TARGET]   (default 30)
# Environment:
#   FUZZ_BUILD    build directory (default build-fuzz); configured with
#                 CC=clang CXX=clang++ -DCACHEWATCH_BUILD_FUZZERS=ON and
#                 -DCACHEWATCH_BUILD_TESTS=OFF, as a unity build
#                 (cmake/Unity.cmake); only the fuzzers are built.
#   FUZZ_TARGETS  the targets to run, space-separated (default: all)
#   JOBS          parallel build jobs, and how many targets run at once
#                 (default: nproc)
#
# Each target runs in one process (no -jobs), JOBS targets at a time, each
# over a fresh working corpus, $FUZZ_BUILD/fuzz-run/<target>/corpus, where
# libFuzzer writes the inputs it finds; the committed fuzz/corpus/<target>/ and fuzz/regressions/<target>/
# are read as extra seed directories and never written. A crash, leak,
# sanitizer report, timeout (25 s for one input) or out-of-memory fails the
# run: the script goes on with the other targets, then exits 1 and prints
# each failing input's path and how to replay it. Logs:
# $FUZZ_BUILD/fuzz-run/<target>.log.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-30}
if ! [[ $seconds =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 [SECONDS_PER_TARGET]" >&2
  exit 2
fi
build=${FUZZ_BUILD:-build-fuzz}
jobs=${JOBS:-$(nproc)}
all_targets=(canonical_json lane_tracker proxy_observe snapshot_validation transcript
  usage_normalizer usage_validation)
read -r -a targets <<<"${FUZZ_TARGETS:-${all_targets[*]}}"

if ! command -v clang++ >/dev/null; then
  echo "run-fuzzers: clang++ not found (Debian: apt-get install clang" \
    "libclang-rt-14-dev)" >&2
  exit 2
fi

echo "== run-fuzzers: configure and build $build"
CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCACHEWATCH_BUILD_FUZZERS=ON -DCACHEWATCH_BUILD_TESTS=OFF \
  -DCACHEWATCH_BUILD_BENCH=OFF -DCACHEWATCH_WERROR=ON -DCMAKE_UNITY_BUILD=ON \
  >/dev/null
cmake --build "$build" -j"$jobs" --target fuzzers

run_dir="$build/fuzz-run"
for target in "${targets[@]}"; do
  if [[ ! -x $build/fuzz/${target}_fuzzer ]]; then
    echo "run-fuzzers: no fuzzer $build/fuzz/${target}_fuzzer" \
      "(targets: ${all_targets[*]})" >&2
    exit 2
  fi
done

fuzz() {  # fuzz <target>: runs it; its exit status goes to <target>.status
  local target=$1 out="$run_dir/$1" status=0
  rm -rf "$out"
  mkdir -p "$out/corpus"
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=0" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    "$build/fuzz/${target}_fuzzer" -max_total_time="$seconds" -timeout=25 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$out/" \
    "$out/corpus" "fuzz/corpus/$target" "fuzz/regressions/$target" \
    >"$run_dir/$target.log" 2>&1 || status=$?
  echo "$status" >"$run_dir/$target.status"
}

# JOBS targets at a time, each in its own single process: every target
# still gets its SECONDS of a core to itself on a machine with JOBS cores.
running=0
for target in "${targets[@]}"; do
  if ((running >= jobs)); then
    wait -n
    running=$((running - 1))
  fi
  echo "== run-fuzzers: $target for ${seconds}s"
  fuzz "$target" &
  running=$((running + 1))
done
wait

failed=()
for target in "${targets[@]}"; do
  fuzzer="$build/fuzz/${target}_fuzzer"
  out="$run_dir/$target"
  log="$run_dir/$target.log"
  status=$(<"$run_dir/$target.status")
  echo "== run-fuzzers: $target"
  grep -E '^(Done|stat::number_of_executed_units|stat::average_exec_per_sec|stat::new_units_added|stat::peak_rss_mb)' \
    "$log" || true
  if ((status != 0)); then
    failed+=("$target")
    echo "run-fuzzers: $target FAILED (exit $status); log: $log" >&2
    grep -E '^(==[0-9]+==ERROR|SUMMARY|.*invariant violated)' "$log" >&2 || true
    for input in "$out"/crash-* "$out"/leak-* "$out"/timeout-* \
      "$out"/oom-* "$out"/slow-unit-*; do
      [[ -e $input ]] || continue
      echo "run-fuzzers: failing input: $input" >&2
      echo "  replay: $fuzzer $input" >&2
      echo "  keep it: cp $input fuzz/regressions/$target/" >&2
    done
  fi
done

if ((${#failed[@]} > 0)); then
  echo "run-fuzzers: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "run-fuzzers: all ${#targets[@]} targets ran ${seconds}s without a finding"
