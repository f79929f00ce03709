#!/usr/bin/env bash
# tools/check-device-data.sh: every shared file the CUDA tests read is carried
# to the GPU machine. The tests name shared files as string literals
# ("models/...", "testdata/..."); each must be a line of tools/device-data.txt,
# or, for a literal that is the start of a name (quant-llama's "...-" + type),
# the start of at least one line. Run by ctest (device_data_list); exits 1
# naming what is missing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
list="$root/tools/device-data.txt"
# The CUDA test executable's sources, and the support files it compiles in.
sources=("$root"/tests/kernels/cuda/*.cpp "$root"/tests/kernels/cuda/*.h "$root"/tests/support/engine_backend_scenarios.cpp
         "$root"/tests/support/stories_fixture.h)
mapfile -t listed < <(sed -e 's/#.*//' -e 's/[[:space:]]*$//' "$list" | grep -v '^$')
mapfile -t named < <(grep -ohE '"(models|testdata)/[^"]+"' "${sources[@]}" | tr -d '"' | sort -u)
missing=0
for n in "${named[@]}"; do
  found=0
  for l in "${listed[@]}"; do
    if [[ "$l" == "$n" || ( "$n" != *.* && "$l" == "$n"* ) ]]; then found=1; break; fi
  done
  if ((!found)); then
    echo "check-device-data: the CUDA tests read $n, which tools/device-data.txt does not carry" >&2
    missing=1
  fi
done
((${#named[@]} > 0)) || { echo "check-device-data: found no shared file named in the CUDA tests" >&2; exit 1; }
((missing == 0)) && echo "check-device-data: all ${#named[@]} shared paths the CUDA tests name are carried"
exit "$missing"
