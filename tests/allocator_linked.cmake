# Run by the ctest cachewatchd_links_tcmalloc (tests/CMakeLists.txt):
#   cmake -DBINARY=<this build's cachewatchd> -DLINKED=<ON|OFF> -P this
# Fails unless the daemon names libtcmalloc_minimal among the libraries it
# needs, i.e. runs on tcmalloc (cmake/Allocator.cmake). The daemon checked
# is the uninstrumented one CACHEWATCH_MEMORY_TEST_DAEMON names when it is
# set (a sanitizer build's tests, scripts/run-sanitizers.sh: the daemon CI
# ships), else this build's when it links tcmalloc (LINKED); with neither
# the test is skipped.
if(DEFINED ENV{CACHEWATCH_MEMORY_TEST_DAEMON})
  set(BINARY "$ENV{CACHEWATCH_MEMORY_TEST_DAEMON}")
elseif(NOT LINKED)
  message("allocator check skipped: this build's cachewatchd uses glibc's "
    "malloc (CACHEWATCH_TCMALLOC=OFF, or a sanitizer build)")
  return()
endif()
execute_process(COMMAND readelf --dynamic ${BINARY}
  OUTPUT_VARIABLE dynamic RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "readelf --dynamic ${BINARY} failed (${result})")
endif()
if(NOT dynamic MATCHES "NEEDED[^\n]*libtcmalloc_minimal\\.so")
  message(FATAL_ERROR "${BINARY} does not need libtcmalloc_minimal:\n${dynamic}")
endif()
message("${BINARY} runs on tcmalloc")
