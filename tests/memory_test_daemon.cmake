# Read by CTest (a TEST_INCLUDE_FILES entry of tests/CMakeLists.txt), after
# the discovered e2e_overload_test tests are defined. When
# CACHEWATCH_MEMORY_TEST_DAEMON names a cachewatchd binary in CTest's
# environment, the million-lanes memory test runs against that daemon
# ($CACHEWATCHD, tests/support/daemon_process.h) and every other test against
# the one built with it. scripts/run-sanitizers.sh sets it to an
# uninstrumented daemon: under ASan the allocator and its quarantine would be
# what the test measures. One CTest run then schedules the memory test
# beside the others instead of after them.
if(DEFINED ENV{CACHEWATCH_MEMORY_TEST_DAEMON})
  set_tests_properties(OverloadTest.MillionDistinctLanesKeepMemoryBounded
    PROPERTIES ENVIRONMENT "CACHEWATCHD=$ENV{CACHEWATCH_MEMORY_TEST_DAEMON}")
endif()
# CTest starts the costliest tests first in a build directory without
# timings of its own (CI's): this one took 83 s in CI's ASan run (2026-12-04).
set_tests_properties(OverloadTest.MillionDistinctLanesKeepMemoryBounded
  PROPERTIES COST 83)
