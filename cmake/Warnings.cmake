# Warnings for the project's own code (generated code does not link this).
# -Werror only where the project controls the compiler: CI and development
# builds turn CACHEWATCH_WERROR on (scripts/run-sanitizers.sh,
# scripts/run-fuzzers.sh, scripts/build-configs.sh, `make check`); a user
# building a release with another compiler is never stopped by a warning.
option(CACHEWATCH_WERROR "Treat the project's warnings as errors" OFF)
add_library(cachewatch_warnings INTERFACE)
target_compile_options(cachewatch_warnings INTERFACE -Wall -Wextra
  $<$<BOOL:${CACHEWATCH_WERROR}>:-Werror>)
# GCC 12 at -O3 reports -Wrestrict false positives inside libstdc++'s
# operator+(const char*, std::string) (GCC bug 105329, fixed in GCC 13):
# still shown, never fatal.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND
   CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(cachewatch_warnings INTERFACE -Wno-error=restrict)
endif()
