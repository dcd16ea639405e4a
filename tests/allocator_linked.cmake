# cmake -DBINARY=<cachewatchd> -P allocator_linked.cmake: fails unless the
# binary names libtcmalloc_minimal among the libraries it needs, i.e. the
# daemon runs on tcmalloc (cmake/Allocator.cmake).
execute_process(COMMAND readelf --dynamic ${BINARY}
  OUTPUT_VARIABLE dynamic RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "readelf --dynamic ${BINARY} failed (${result})")
endif()
if(NOT dynamic MATCHES "NEEDED[^\n]*libtcmalloc_minimal\\.so")
  message(FATAL_ERROR "${BINARY} does not need libtcmalloc_minimal:\n${dynamic}")
endif()
