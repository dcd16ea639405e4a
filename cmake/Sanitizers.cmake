# CACHEWATCH_SANITIZE builds the project's own code with the named
# sanitizers, e.g. "address,undefined" or "thread": every target that links
# cachewatch_warnings (cmake/Warnings.cmake), i.e. all of it but the code
# protoc generates, which like Debian's libraries stays uninstrumented (GCC
# takes ~7x as long on the generated gRPC stubs with ASan + UBSan). Every
# executable links the runtime. Any finding aborts the process
# (-fno-sanitize-recover), so a test that triggers one fails. -O1, the
# sanitizers' usual level: instrumented code compiles ~30 % faster than at
# -O2 and reports stay readable.
# scripts/run-sanitizers.sh configures the builds CI runs.
set(CACHEWATCH_SANITIZE "" CACHE STRING
  "Sanitizers for the project's code: address,undefined | thread | empty")
if(CACHEWATCH_SANITIZE)
  target_compile_options(cachewatch_warnings INTERFACE
    -fsanitize=${CACHEWATCH_SANITIZE} -fno-sanitize-recover=all
    -fno-omit-frame-pointer -O1)
  add_link_options(-fsanitize=${CACHEWATCH_SANITIZE})
endif()
