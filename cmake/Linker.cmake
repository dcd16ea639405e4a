# CACHEWATCH_LINKER chooses the linker: "auto" (the default) links with LLVM's
# lld when the compiler can use it (-fuse-ld=lld; Debian package `lld`,
# scripts/install-deps.sh installs it) and with the compiler's default linker
# otherwise; "lld" requires lld; "default" keeps the compiler's default
# (GNU ld). lld links these binaries 2-4x faster than GNU ld, and every build
# links 40-odd executables against gRPC, protobuf and abseil
# (docs/PERFORMANCE.md, "CI time"). The choice changes no code generation.
set(CACHEWATCH_LINKER auto CACHE STRING "Linker: auto | lld | default")
set_property(CACHE CACHEWATCH_LINKER PROPERTY STRINGS auto lld default)
if(CACHEWATCH_LINKER STREQUAL "auto" OR CACHEWATCH_LINKER STREQUAL "lld")
  include(CheckLinkerFlag)
  check_linker_flag(CXX -fuse-ld=lld CACHEWATCH_HAVE_LLD)
  if(CACHEWATCH_HAVE_LLD)
    add_link_options(-fuse-ld=lld)
  elseif(CACHEWATCH_LINKER STREQUAL "lld")
    message(FATAL_ERROR "CACHEWATCH_LINKER=lld, but ${CMAKE_CXX_COMPILER} "
      "cannot link with -fuse-ld=lld (Debian: apt-get install lld)")
  endif()
elseif(NOT CACHEWATCH_LINKER STREQUAL "default")
  message(FATAL_ERROR "CACHEWATCH_LINKER must be auto, lld or default, not "
    "'${CACHEWATCH_LINKER}'")
endif()
