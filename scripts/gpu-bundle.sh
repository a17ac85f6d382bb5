#!/usr/bin/env bash
# Packs a CUDA build of weft for a GPU machine that lacks weft's build
# dependencies (oneDNN, fmt, protobuf, cairo, Open MPI): the weft binary, the
# test binaries with CUDA tests, and every shared library they load except the
# C runtime and the CUDA driver and libraries, which the GPU machine has.
#
#   scripts/gpu-bundle.sh [BUILD] [OUT.tar.xz]     (defaults: build-cuda, weft-gpu.tar.xz)
#
# On the GPU machine, in a checkout of the same commit:
#   mkdir -p bundle && tar -xJf weft-gpu.tar.xz -C bundle
#   LD_LIBRARY_PATH=$PWD/bundle/lib:$LD_LIBRARY_PATH WEFT_BUILD=bundle scripts/gpu-check.sh --no-build
set -euo pipefail
B=${1:-build-cuda}
OUT=${2:-weft-gpu.tar.xz}
tests=(core_tests kernels_tests parallel_tests comm/comm_tests nn/nn_tests)
bins=("$B/bin/weft")
for t in "${tests[@]}"; do bins+=("$B/tests/$t"); done
for f in "${bins[@]}"; do
  [ -x "$f" ] || { echo "gpu-bundle: $f is missing: build it first (cmake --build $B)" >&2; exit 2; }
done
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/tests/comm" "$stage/tests/nn" "$stage/lib"
cp "$B/bin/weft" "$stage/bin/"
for t in "${tests[@]}"; do cp "$B/tests/$t" "$stage/tests/$t"; done
strip --strip-unneeded "$stage"/bin/* "$stage"/tests/*_tests "$stage"/tests/*/*_tests
for f in "${bins[@]}"; do
  if ldd "$f" | grep -q 'not found'; then
    echo "gpu-bundle: $f needs libraries this machine lacks:" >&2
    ldd "$f" | grep 'not found' >&2
    exit 2
  fi
done
# The C runtime and the CUDA driver/libraries come from the GPU machine.
skip='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread|libdl\.so|librt\.so|libresolv|libcuda\.so|libcublas|libcudart|libnccl)'
for f in "${bins[@]}"; do
  ldd "$f" | awk '$3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  if ! [[ $name =~ $skip ]]; then cp -L "$path" "$stage/lib/$name"; fi
done
tar -cJf "$OUT" -C "$stage" .
echo "gpu-bundle: the GPU machine provides $(ldd "$B/bin/weft" | awk '/libcublasLt|libnccl/ {print $1}' | sort -u | tr '\n' ' ')and the CUDA driver"
echo "gpu-bundle: $OUT ($(du -h "$OUT" | cut -f1)): $(ls "$stage/lib" | wc -l) libraries"
