// FUZZ_CHECK(condition): the fuzz targets' assertion. When `condition` is
// false it prints the condition and its place to stderr and aborts, which
// libFuzzer reports as a crash (and which fails a replay test). Active in
// every build type, unlike assert().
#ifndef CACHEWATCH_FUZZ_FUZZ_CHECK_H_
#define CACHEWATCH_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(condition)                                           \
  do {                                                                  \
    if (!(condition)) {                                                 \
      std::fprintf(stderr, "%s:%d: invariant violated: %s\n", __FILE__, \
                   __LINE__, #condition);                               \
      std::abort();                                                     \
    }                                                                   \
  } while (false)

#endif  // CACHEWATCH_FUZZ_FUZZ_CHECK_H_
