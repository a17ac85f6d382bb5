#!/usr/bin/env bash
# Runs scripts/gpu-check.sh on a bundle made by scripts/gpu-bundle.sh, on a GPU
# machine that lacks weft's build dependencies and whose CUDA libraries
# (cuBLASLt, NCCL, cuDNN, the CUDA runtime cuDNN's frontend opens) may come
# from pip packages, as PyTorch's nvidia-* wheels install them: their lib
# folders go on LD_LIBRARY_PATH. The logs are packed into one archive.
#
#   scripts/gpu-bundle-run.sh BUNDLE.tar.xz [LOGS.tar.gz]
#
# Environment: what gpu-check.sh reads (GPU_CHECK_SECTIONS, GPU_CHECK_DEADLINE, ...).
# Exit status: gpu-check.sh's.
set -uo pipefail
cd "$(dirname "$0")/.."
bundle=${1:?usage: scripts/gpu-bundle-run.sh BUNDLE.tar.xz [LOGS.tar.gz]}
logs=${2:-gpu-check-logs.tar.gz}
rm -rf bundle && mkdir -p bundle && tar -xJf "$bundle" -C bundle || exit 2
# The lib folders of the pip packages named nvidia-* of the python3 on PATH.
site=$(python3 -c 'import nvidia, os; print(os.path.dirname(list(nvidia.__path__)[0]))' 2>/dev/null)
libs=""
if [ -n "$site" ]; then
  libs=$(find "$site/nvidia" -name 'lib*.so*' -printf '%h\n' 2>/dev/null | sort -u | tr '\n' ':')
fi
export LD_LIBRARY_PATH=$PWD/bundle/lib:${libs}${LD_LIBRARY_PATH:-}
python3 -m pip show nvidia-cudnn-cu13 nvidia-cublas nvidia-nccl-cu13 torch 2>/dev/null |
  grep -E '^(Name|Version)' | paste - - | sed 's/^/gpu-bundle-run: /'
if ldd bundle/bin/weft | grep 'not found'; then
  echo "gpu-bundle-run: bundle/bin/weft misses the libraries above" >&2
fi
WEFT_BUILD=bundle bash scripts/gpu-check.sh --no-build
rc=$?
tar -czf "$logs" -C "${GPU_CHECK_OUT:-gpu-check-out}" . 2>/dev/null
exit $rc
