# Unity builds (-DCMAKE_UNITY_BUILD=ON): CMake compiles each target's sources
# in batches of up to 8 per translation unit, so the gRPC, protobuf, abseil
# and GoogleTest headers are parsed, and their inline functions compiled, once
# per batch instead of once per file (docs/PERFORMANCE.md, "CI time"). CI
# builds every directory but one this way: the sanitizer builds
# (scripts/run-sanitizers.sh), the fuzzers (scripts/run-fuzzers.sh) and
# Release; Debug too, but with -DCACHEWATCH_UNITY_BUILD_TESTS=OFF
# (scripts/build-configs.sh). RelWithDebInfo is not a unity build. So every
# file is still compiled on its own somewhere, as a user's build does, and a
# file that misses an #include still fails CI: the libraries, daemon, CLI
# and client in RelWithDebInfo, the tests and their support code in Debug.
option(CACHEWATCH_UNITY_BUILD_TESTS
  "In a unity build, batch the tests' sources too (OFF: one file at a time)"
  ON)
#
# A batch puts the anonymous namespaces of its files into one translation
# unit. The files below define a name (a helper, a constant) that another
# file of their target defines too, or overloads one, and are compiled on
# their own; a new clash shows as a "redefinition" or "ambiguous" error in
# a unity build only: add the file here (or rename the helper).
set_target_properties(cachewatch_proto PROPERTIES UNITY_BUILD OFF)
foreach(_entry
    "daemon/core:lane_restore_test.cc;tool_list_interner_test.cc"
    "daemon/store/sqlite:write_connection.cc"
    "daemon/receiver/proxy:observed_usage.cc;proxy_server.cc;observed_usage_test.cc;sse_reader_test.cc;exchange_observer_test.cc"
    "client:tests/tool_order_test.cc;tests/canonical_json_test.cc"
    "cli:gemini_transcript.cc;simulate.cc;fleet.cc")
  string(REPLACE ":" ";" _parts "${_entry}")
  list(POP_FRONT _parts _dir)
  list(TRANSFORM _parts PREPEND "${PROJECT_SOURCE_DIR}/${_dir}/")
  set_source_files_properties(${_parts}
    DIRECTORY "${PROJECT_SOURCE_DIR}/${_dir}"
    PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
endforeach()

# The tests' targets: those that link GoogleTest, the support libraries of
# tests/, and the fuzzers' corpus replays.
set(_cachewatch_tests_dir "${PROJECT_SOURCE_DIR}/tests")
function(_cachewatch_test_targets dir out)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  set(tests "")
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(type STREQUAL "INTERFACE_LIBRARY" OR type STREQUAL "UTILITY")
      continue()
    endif()
    get_target_property(libraries ${target} LINK_LIBRARIES)
    cmake_path(IS_PREFIX _cachewatch_tests_dir "${dir}" in_tests)
    if(libraries MATCHES "GTest::" OR in_tests OR target MATCHES "_replay$")
      list(APPEND tests ${target})
    endif()
  endforeach()
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(subdir IN LISTS subdirs)
    _cachewatch_test_targets("${subdir}" subdir_tests)
    list(APPEND tests ${subdir_tests})
  endforeach()
  set(${out} ${tests} PARENT_SCOPE)
endfunction()

if(NOT CACHEWATCH_UNITY_BUILD_TESTS)
  _cachewatch_test_targets("${PROJECT_SOURCE_DIR}" _test_targets)
  set_target_properties(${_test_targets} PROPERTIES UNITY_BUILD OFF)
endif()
