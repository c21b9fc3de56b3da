#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs what gradcodec needs to build, test and benchmark on Debian 12 (bookworm).
# Skips apt entirely when everything is already installed. libopenblas0-pthread becomes the system
# BLAS: without it Debian's torch multiplies matrices with the reference BLAS, and the transformer
# of bench/real_gradients.py takes over 15 minutes instead of about a minute.
set -euo pipefail
PACKAGES=(cmake g++ make pkg-config libcli11-dev libhdf5-dev libeigen3-dev liblzma-dev libzstd-dev
  libzfp-dev libfpzip-dev
  libxxhash-dev catch2 nlohmann-json3-dev libzip-dev zlib1g-dev libbenchmark-dev
  python3-numpy python3-h5py pybind11-dev python3-dev python3-pytest python3-torch
  python3-matplotlib libopenmpi-dev openmpi-bin
  libopenblas0-pthread zstd)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "gradcodec setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
