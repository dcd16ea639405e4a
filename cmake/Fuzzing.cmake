# CACHEWATCH_BUILD_FUZZERS builds the libFuzzer targets in fuzz/ (clang only;
# scripts/run-fuzzers.sh configures and runs them). Every target of this tree
# is then compiled with coverage instrumentation for libFuzzer and with
# AddressSanitizer and UndefinedBehaviorSanitizer (generated code included;
# Debian's libraries stay uninstrumented); any UB finding aborts, so libFuzzer
# reports it as a crash. Only the *_fuzzer executables link libFuzzer itself.
if(CACHEWATCH_BUILD_FUZZERS)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "CACHEWATCH_BUILD_FUZZERS needs clang: configure "
      "with CC=clang CXX=clang++ (scripts/run-fuzzers.sh does)")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined
    -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
