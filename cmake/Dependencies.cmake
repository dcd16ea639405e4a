# Every dependency comes from Debian 12's packages (scripts/install-deps.sh).
find_package(Threads REQUIRED)
find_package(Protobuf REQUIRED)  # Module mode: Debian ships no config.
find_package(gRPC CONFIG REQUIRED)
find_package(absl CONFIG REQUIRED)
find_package(SQLite3 REQUIRED)
find_package(prometheus-cpp CONFIG REQUIRED)
find_package(nlohmann_json CONFIG REQUIRED)
find_package(simdjson CONFIG REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(yaml-cpp CONFIG REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
pkg_check_modules(LIBPQ REQUIRED IMPORTED_TARGET libpq)
if(CACHEWATCH_BUILD_TESTS)
  find_package(GTest CONFIG REQUIRED)
endif()
if(CACHEWATCH_BUILD_BENCH)
  find_package(benchmark CONFIG REQUIRED)
endif()
# The HTTP proxy receiver: Boost.Beast/Asio (header-only) over OpenSSL.
find_package(Boost 1.74 REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(ZLIB REQUIRED)  # Decoding gzip/deflate responses for observation.
