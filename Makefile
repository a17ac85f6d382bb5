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

# Until `weft train` exists this runs the most useful job weft has: the GEMM
# benchmark of one GPT-2-small layer against direct oneDNN.
train: build
	@$(WEFT) bench gemm

bench: build
	@$(WEFT) bench gemm

clean:
	rm -rf $(BUILD)
