# CACHEWATCH_SANITIZE builds the project's own code with the named
# sanitizers, e.g. "address,undefined" or "thread": every target that links
# cachewatch_warnings (cmake/Warnings.cmake), i.e. all of it but the code
# protoc generates, which like Debian's libraries stays uninstrumented (GCC
# takes ~7x as long on the generated gRPC stubs with ASan + UBSan). Every
# executable links the runtime. Any finding aborts the process
# (-fno-sanitize-recover), so a test that triggers one fails. -O0: GCC
# compiles instrumented code ~3x as fast as at -O1 (88 s -> 32 s for
# daemon/config/config.cc), which is what keeps CI under its time budget;
# the tests wait on I/O more than they compute.
# scripts/run-sanitizers.sh configures the builds CI runs.
set(CACHEWATCH_SANITIZE "" CACHE STRING
  "Sanitizers for the project's code: address,undefined | thread | empty")
if(CACHEWATCH_SANITIZE)
  target_compile_options(cachewatch_warnings INTERFACE
    -fsanitize=${CACHEWATCH_SANITIZE} -fno-sanitize-recover=all
    -fno-omit-frame-pointer -O0)
  add_link_options(-fsanitize=${CACHEWATCH_SANITIZE})
endif()
