# The sanitizer builds (scripts/run-sanitizers.sh) are unity builds
# (-DCMAKE_UNITY_BUILD=ON): CMake compiles each target's sources in batches
# of up to 8 per translation unit, so the gRPC, protobuf, abseil and
# GoogleTest headers are parsed, and their inline functions compiled, once
# per batch instead of once per file (docs/PERFORMANCE.md, "CI time"). The
# build types of scripts/build-configs.sh are not unity builds: they compile
# every file on its own, as a user's build does, so a file that misses an
# #include still fails CI there.
#
# A batch puts the anonymous namespaces of its files into one translation
# unit. The files below define a name (a helper, a constant) that another
# file of their target defines too, or overloads one, and are compiled on
# their own; a new clash shows as a "redefinition" or "ambiguous" error in
# build-asan/build-tsan only: add the file here (or rename the helper).
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
