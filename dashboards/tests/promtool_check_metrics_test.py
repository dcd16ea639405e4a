#!/usr/bin/env python3
"""`promtool check metrics` (naming, help and unit lint) over a real scrape
of cachewatchd after `cachewatch simulate` ran against it, so that every
label combination the daemon creates on traffic is in the scrape. Passes
when promtool exits 0.
"""

import os
import subprocess
import sys

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cwtest  # noqa: E402


def main():
    parser = cwtest.common_args(__doc__.splitlines()[0])
    parser.add_argument("--promtool", required=True)
    args = parser.parse_args()
    promtool = cwtest.require_executable(args.promtool, "promtool")
    procs = cwtest.Processes("cachewatch-dash-lint-")
    failed = True
    try:
        _, grpc, metrics = cwtest.start_daemon(
            procs, args.cachewatchd, os.path.join(procs.tmp, "cachewatch.db"))
        print(cwtest.simulate(args.cachewatch, grpc, seed=4, tag="dash-lint"))
        scrape = cwtest.http_get(f"http://{metrics}/metrics")
        families = sum(1 for line in scrape.splitlines()
                       if line.startswith("# TYPE "))
        cwtest.log(f"scraped {len(scrape)} bytes, {families} metric families")
        for needed in ("cachewatch_breaks_total{", "cachewatch_turns_total{",
                       "cachewatch_break_estimated_cost_usd_total{",
                       "cachewatch_store_commit_duration_seconds_bucket{"):
            if needed not in scrape:
                print(f"FAIL: {needed} missing from the scrape")
                return 1
        result = subprocess.run([promtool, "check", "metrics"], input=scrape,
                                capture_output=True, text=True, timeout=30,
                                check=False)
        print(result.stdout, result.stderr, sep="")
        if result.returncode != 0:
            print(f"FAIL: promtool check metrics exited {result.returncode}")
            return 1
        failed = False
        print("PASS")
        return 0
    finally:
        procs.close(failed)


if __name__ == "__main__":
    sys.exit(main())
