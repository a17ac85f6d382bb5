# The two commands: `make train` and `make test`. Both install what is missing
# (scripts/install-deps.sh), configure and build first.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release
WEFT := $(BUILD)/bin/weft

.PHONY: all deps build test train bench clean

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

clean:
	rm -rf $(BUILD)
