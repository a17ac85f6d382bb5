#!/usr/bin/env bash
# Installs the Debian packages weft needs, only those that are missing.
# Idempotent and fast when everything is present; runs `apt-get update` only
# when something has to be installed.
# iproute2 (ip, tc): scripts/netns-cluster.sh, the multi-host test bed.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  libdnnl-dev libxxhash-dev
  libopenmpi-dev openmpi-bin
  libprotobuf-dev protobuf-compiler
  libcairo2-dev
  libgtest-dev libbenchmark-dev libexpat1-dev
  libfmt-dev libcli11-dev
  nlohmann-json3-dev
  libpcre2-dev libicu-dev
  unzip
  fortunes
  iproute2
)

# NVIDIA's header-only cuDNN frontend (the fused attention of the CUDA
# backend, kernels/cuda/attention_cudnn.cpp), pinned and hash-checked, its
# include/ unpacked under .deps/ where cmake/cuda.cmake looks. Only where the
# CUDA toolkit has cuDNN's headers; a failure here only leaves cuDNN attention
# out of the build (the build says so), never the build itself.
cudnn_frontend() {
  local version=1.32.0
  local sha=c6006556017a4d1c914c52a556c71b1267f2d6a0500f742e7b4edef539878df0
  local dest=.deps/cudnn-frontend-$version
  [ -f "$dest/include/cudnn_frontend.h" ] && return 0
  [ -f /usr/local/cuda/include/cudnn.h ] || [ -n "${CUDNN_INCLUDE_DIR:-}" ] || return 0
  local tmp
  tmp=$(mktemp -d)
  if python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
    --implementation cp --platform manylinux_2_28_x86_64 -d "$tmp" \
    "nvidia-cudnn-frontend==$version" >/dev/null 2>&1 &&
    echo "$sha  $(ls "$tmp"/*.whl)" | sha256sum -c --quiet - &&
    mkdir -p "$dest" && unzip -q -o "$tmp"/*.whl 'include/*' -d "$dest"; then
    echo "install-deps: cuDNN frontend $version headers in $dest"
  else
    echo "install-deps: could not fetch the cuDNN frontend $version headers (pip download" \
      "nvidia-cudnn-frontend==$version); building without cuDNN attention" >&2
    rm -rf "$dest"
  fi
  rm -rf "$tmp"
}
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  (cd "$(dirname "$0")/.." && cudnn_frontend)
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo_cmd=(sudo)
  else
    echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
(cd "$(dirname "$0")/.." && cudnn_frontend)
