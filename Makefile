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

.PHONY: all deps build test train bench fuzz fuzz-build fuzz-corpus clean

all: build

deps:
	@bash scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	@ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) --timeout 900

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
	rm -rf $(BUILD) $(FUZZ_BUILD)
