# The two commands a new machine needs (Debian 12, as root):
#   make run    install dependencies, build, start cachewatchd on ./cachewatch.db
#   make test   install dependencies, then every test, as CI runs them: a
#               clean compile of the RelWithDebInfo build type
#               (build-relwithdebinfo), the whole suite built with
#               AddressSanitizer + UBSan (build-asan), the concurrent parts
#               with ThreadSanitizer (build-tsan), each fuzzer for
#               FUZZ_SECONDS (build-fuzz), and a clean compile of the Debug
#               and Release build types (build-debug, build-release), all
#               with -Werror
# A plain `cmake` build (`make build`, a release) does not use -Werror.
# While developing:
#   make check  build without sanitizers in $(BUILD) and run the whole suite
BUILD ?= build
JOBS ?= $(shell nproc)
SUDO := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

.PHONY: deps configure build test check sanitize configs run bench fuzz format clean

deps:
	$(SUDO) bash scripts/install-deps.sh

configure: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: configure
	cmake --build $(BUILD) -j$(JOBS)

# CI's order: RelWithDebInfo first, so that the sanitizer runs take their
# uninstrumented daemon from it instead of compiling it again, then the
# sanitizers, the fuzzers, and Debug and Release. Its build directories are
# Ninja's (CMAKE_GENERATOR, for a directory configured afresh; one already
# configured keeps its generator): in a unity build a target's few large
# files wait, under the Makefile generator, until every library it links is
# built, and one core idles (docs/PERFORMANCE.md, "CI time, round 4").
CI_ENV := CMAKE_GENERATOR=Ninja JOBS=$(JOBS)
test: deps
	$(CI_ENV) bash scripts/build-configs.sh RelWithDebInfo
	$(CI_ENV) BUILD=build-relwithdebinfo bash scripts/run-sanitizers.sh all
	$(CI_ENV) bash scripts/run-fuzzers.sh $(FUZZ_SECONDS)
	$(CI_ENV) bash scripts/build-configs.sh Debug Release

check: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCACHEWATCH_WERROR=ON
	cmake --build $(BUILD) -j$(JOBS)
	ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS)

# scripts/build-configs.sh: Debug, RelWithDebInfo and Release from clean,
# -Werror, no tests run.
configs: deps
	JOBS=$(JOBS) bash scripts/build-configs.sh all

# scripts/run-sanitizers.sh: ASan + UBSan over every test, TSan over the
# tracker/pipeline, store and reporter tests.
sanitize: deps
	BUILD=$(BUILD) JOBS=$(JOBS) bash scripts/run-sanitizers.sh all

run: build
	./$(BUILD)/daemon/cachewatchd $(ARGS)

bench: configure
	cmake --build $(BUILD) -j$(JOBS) --target bench_run

# Builds the libFuzzer targets with clang in build-fuzz and runs each for
# FUZZ_SECONDS (fuzz/README.md). Needs clang and libclang-rt-14-dev.
FUZZ_SECONDS ?= 10
fuzz: deps
	JOBS=$(JOBS) bash scripts/run-fuzzers.sh $(FUZZ_SECONDS)

format:
	git ls-files '*.cc' '*.h' | xargs clang-format -i

clean:
	rm -rf $(BUILD)
