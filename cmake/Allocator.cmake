# CACHEWATCH_TCMALLOC links cachewatchd against gperftools' tcmalloc_minimal
# (Debian package libgoogle-perftools-dev; the daemon then needs
# libtcmalloc-minimal4 at run time) instead of glibc's malloc. The daemon
# allocates and frees a handful of objects per record on several threads
# (gRPC buffers, protobuf messages, the store's rows); with tcmalloc its CPU
# per record fell by 0-15 % depending on the row, and its peak resident set
# rose by ~10 MiB (docs/PERFORMANCE.md, round 20). For the HTTP proxy's
# observer the measurements disagree, from ~+15 % CPU per observed exchange
# to none (docs/PROXY.md, "On tcmalloc"); a daemon that mostly proxies may
# build with it OFF. Only cachewatchd links it: the libraries, tests, CLI
# and clients keep the system allocator, and a build with sanitizers or
# fuzzers (whose runtimes replace malloc themselves) never links it. OFF
# builds with glibc's malloc.
option(CACHEWATCH_TCMALLOC
  "Link cachewatchd against tcmalloc_minimal (gperftools)" ON)
if(CACHEWATCH_TCMALLOC AND NOT CACHEWATCH_SANITIZE
   AND NOT CACHEWATCH_BUILD_FUZZERS)
  find_library(CACHEWATCH_TCMALLOC_LIBRARY tcmalloc_minimal)
  if(NOT CACHEWATCH_TCMALLOC_LIBRARY)
    message(FATAL_ERROR "CACHEWATCH_TCMALLOC is ON, but libtcmalloc_minimal "
      "was not found (Debian: apt-get install libgoogle-perftools-dev, or "
      "configure with -DCACHEWATCH_TCMALLOC=OFF for glibc's malloc)")
  endif()
  set(CACHEWATCH_USES_TCMALLOC ON)
else()
  set(CACHEWATCH_USES_TCMALLOC OFF)
endif()

# Links `target` against tcmalloc when the build uses it. Named before
# glibc on the link line, it is where the linker resolves malloc and free
# (so --as-needed keeps it too); tests/allocator_linked.cmake checks it.
function(cachewatch_link_allocator target)
  if(CACHEWATCH_USES_TCMALLOC)
    target_link_libraries(${target} PRIVATE ${CACHEWATCH_TCMALLOC_LIBRARY})
  endif()
endfunction()
