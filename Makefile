# The two commands: `make train` and `make test`. Both install what is missing
# (scripts/install-deps.sh), configure and build first.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release
WEFT := $(BUILD)/bin/weft

# The fuzz targets (tests/fuzz): clang with libFuzzer, ASan and UBSan in
# build-fuzz/; each runs FUZZ_SECONDS, FUZZ_JOBS at a time (FUZZ_TARGETS:
# a subset, e.g. "json cli"). Crash inputs land in tests/fuzz/regressions/.
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_JOBS ?= 1
FUZZ_TARGETS ?=

.PHONY: all deps build test test-avx2 test-asan test-tsan train bench fuzz fuzz-build fuzz-corpus clean

all: build

deps:
	@bash scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	@ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) --timeout 900

# The whole suite under AddressSanitizer + UndefinedBehaviorSanitizer, built in
# build-asan/ (CMake option WEFT_SANITIZE=address). Any report fails the test
# that triggered it. Open MPI keeps its allocations until exit by design: leak
# checking is off (LeakSanitizer would report the library, not weft).
SAN_FLAGS := -DCMAKE_BUILD_TYPE=RelWithDebInfo
test-asan: deps
	@cmake -S . -B build-asan -G Ninja $(SAN_FLAGS) -DWEFT_SANITIZE=address >/dev/null
	@cmake --build build-asan -j $(JOBS)
	@ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:detect_stack_use_after_return=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir build-asan --output-on-failure -j $(JOBS) --timeout 1800

# The ISA-sensitive layers again with the AVX2 path forced: oneDNN capped to
# AVX2 (no bf16 kernels: the emulated path) and weft's own vector kernels
# capped the same way, so an AVX-512 or AMX machine also runs what an
# AVX2-only machine runs (GEMM emulation, casts, training trajectories,
# quantized recipes). Skipped, saying so, where the processor has no AVX-512:
# `make test` ran that path already. MPI jobs are left out (their mpirun
# cases run the same code as the threaded ones).
AVX2_LABELS := ^(kernels|parallel|nn|optim|train)$$
test-avx2: build
	@if grep -qw avx512f /proc/cpuinfo; then \
	  ONEDNN_MAX_CPU_ISA=AVX2 WEFT_MAX_CPU_ISA=avx2 \
	    ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) --timeout 900 \
	      -L '$(AVX2_LABELS)' -LE '^(mpi|avx2)$$'; \
	else \
	  echo "test-avx2: this processor has no AVX-512: make test ran the AVX2 path already"; \
	fi

# ThreadSanitizer on the threaded parts, on the local backend (ranks are
# threads): the collectives and their faults, the grid, the reduction loops,
# the parallel mappings, GEMM schedules and overlap algorithms, RNG streams, the per-thread core share and memory
# accounting, gradient sync, checkpoints and the trainer; built in build-tsan/
# (WEFT_SANITIZE=thread). One kernel thread per rank: libgomp, which the
# kernels' OpenMP regions run on, is not built with TSan (tests/tsan.supp).
TSAN_TESTS := ^(Worlds/LocalCollectives|LocalFaults|LocalBackend|GridLayout|Reduce|Worlds/Mappings|Mapping|RngTracker|Threads|Timeout|Memory|GradSync|TrainerTest|KvReplication|Checkpoint|SaveFaults|Layouts/Overlap|OverlapOrder|OverlapFallback|Worlds/Schedules|ScheduleErrors|GtpChain|GtpBatch|GtpRows|WeightCache|GtpTrainer|EpTrainer|DelayedScaling)[./]
TSAN_TARGETS := comm_tests core_tests parallel_tests optim_tests io_tests train_tests
test-tsan: deps
	@cmake -S . -B build-tsan -G Ninja $(SAN_FLAGS) -DWEFT_SANITIZE=thread >/dev/null
	@cmake --build build-tsan -j $(JOBS) --target $(TSAN_TARGETS)
	@WEFT_NUM_THREADS=1 OMP_NUM_THREADS=1 \
	  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(CURDIR)/tests/tsan.supp" \
	  ctest --test-dir build-tsan --output-on-failure -j $(JOBS) --timeout 1800 -R '$(TSAN_TESTS)'

# The main job: the tiny GPT on Debian's fortunes, TP=2 on the local backend,
# a few minutes on two cores, then a generated sample. ARGS adds options
# (make train ARGS="--steps 2000 --save ck").
train: build
	@$(WEFT) train $(ARGS)

bench: build
	@$(WEFT) bench gemm

fuzz-build: deps
	@command -v clang++ >/dev/null || { echo "make fuzz needs clang: apt-get install clang libomp-dev"; exit 2; }
	@cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
	  -DWEFT_FUZZ=ON -DWEFT_WITH_MPI=OFF -DWEFT_BUILD_EXAMPLES=OFF >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS)

fuzz: fuzz-build
	@bash tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ_JOBS) $(FUZZ_TARGETS)

# Rewrites the seed corpus from the files weft writes (tests/fuzz/make_corpus.cpp).
fuzz-corpus: build
	@$(BUILD)/tests/fuzz/fuzz_make_corpus tests/fuzz/corpus

clean:
	rm -rf $(BUILD) $(FUZZ_BUILD) build-asan build-tsan
