#!/usr/bin/env bash
# Installs the Debian 12 packages Glassbox builds with, if any are missing.
# Runs apt-get as root, or through sudo for a normal user. Idempotent and quiet
# when everything is already there. CUDA is optional and never installed here:
# it is used when nvcc is found under /usr/local/cuda or on PATH.
#
# The names live in tools/packages.txt, by group: by default [toolchain],
# [workflow], [headless], [ui] and [test]; GLASSBOX_SANITIZERS=1 adds
# [sanitizers] (clang for tools/sanitize.sh and tools/fuzz.sh);
# GLASSBOX_HEADLESS=1 installs only [toolchain], [headless] and [test] (no Qt,
# no git, no ccache, no sanitizers).
set -euo pipefail

tools="$(dirname "${BASH_SOURCE[0]}")"
groups=(toolchain workflow headless ui test)
if [[ "${GLASSBOX_SANITIZERS:-0}" == "1" ]]; then
  groups+=(sanitizers)
fi
if [[ "${GLASSBOX_HEADLESS:-0}" == "1" ]]; then
  groups=(toolchain headless test)
fi
packages=()
mapfile -t packages < <("$tools/packages.sh" "${groups[@]}")
((${#packages[@]} > 0)) || { echo "glassbox: no packages read from $tools/packages.txt" >&2; exit 1; }

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
