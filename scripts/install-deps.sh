#!/usr/bin/env bash
# Installs the Debian packages pippy builds and tests with. Idempotent: prints
# nothing and touches nothing when every package is already present.
set -euo pipefail

packages=(
  cmake ninja-build ccache lld g++ make
  llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools
  libtorch-dev python3-torch libgloo-dev libopenblas0-pthread
  libgtest-dev python3-numpy libzstd-dev zlib1g-dev
  python3-torchvision python3-torchtext python3-torchaudio
  libmimalloc-dev
  iproute2  # two-hosts.test: network namespaces, where the tests run as root
  debootstrap  # scripts/torch2-check.sh: a Debian 13 root with PyTorch 2.6
  flatbuffers-compiler libflatbuffers-dev nlohmann-json3-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "pippy: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq "${missing[@]}" >/dev/null
