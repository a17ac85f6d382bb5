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
  fortunes
  iproute2
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
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
