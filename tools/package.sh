#!/usr/bin/env bash
# Builds the Debian package and checks that it installs and runs (issue #43):
#   tools/package.sh             build build/package/glassbox_*.deb, lintian (no
#                                errors), then from a throw-away root (dpkg -x):
#                                the installed glassbox-cli generates on the
#                                installed starter model and lists the shipped
#                                model catalog, and the installed
#                                workbench opens on it with no model named
#                                (offscreen screenshot)
#   tools/package.sh --install   also installs it on this machine (root: CI) with
#                                apt and runs the installed /usr/bin programs
# Two packages when nvcc is found (GLASSBOX_PACKAGE_CUDA=OFF: only the first):
#   glassbox       the programs; CPU only, depends on no CUDA library
#   glassbox-cuda  the CUDA plugin (lib/glassbox/libglassbox-cuda.so) the programs
#                  open at run time; depends on glassbox of the same version and
#                  the C/C++ runtimes only (NVIDIA's runtime and cuBLAS are not
#                  Debian packages)
# Checked: glassbox alone runs, and --device cuda says the backend is not
# installed; with glassbox-cuda too, the plugin is found and loads (on a machine
# without a GPU --device cuda then names the driver or device it lacks, and auto
# runs on the CPU). Test data (the starter model) comes from ../shared or
# $GLASSBOX_SHARED_DIR, as for the tests.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${GLASSBOX_PACKAGE_BUILD_DIR:-$root/build/package}"
shared="${GLASSBOX_SHARED_DIR:-$root/../shared}"
install_here=0
[[ "${1:-}" == "--install" ]] && install_here=1

if ! command -v lintian >/dev/null && [[ $(id -u) -eq 0 ]]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends lintian >/dev/null
fi
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGLASSBOX_CUDA="${GLASSBOX_PACKAGE_CUDA:-AUTO}" \
  -DGLASSBOX_TESTS=OFF -DGLASSBOX_UNITY=ON -DGLASSBOX_SHARED_DIR="$shared" >/dev/null
cmake --build "$build" -j "$(nproc)"
rm -f "$build"/glassbox_*.deb "$build"/glassbox-cuda_*.deb
(cd "$build" && cpack -G DEB >/dev/null)
deb=$(ls "$build"/glassbox_*_amd64.deb)
cuda_deb=$(ls "$build"/glassbox-cuda_*_amd64.deb 2>/dev/null || true)
for d in "$deb" $cuda_deb; do
  echo "package.sh: built $d"
  dpkg-deb --info "$d" | grep -E "^ (Package|Depends|Installed-Size):"
done
fail() { echo "package.sh: $*" >&2; exit 1; }
if dpkg-deb --field "$deb" Depends | grep -qi "cuda\|cublas"; then fail "glassbox depends on CUDA libraries"; fi
listing=$(dpkg-deb -c "$deb")
if grep -q "libglassbox-cuda" <<<"$listing"; then fail "glassbox contains the CUDA plugin"; fi
if [[ -n "$cuda_deb" ]]; then
  version=$(dpkg-deb --field "$deb" Version)
  cuda_depends=$(dpkg-deb --field "$cuda_deb" Depends)
  [[ "$cuda_depends" == "glassbox (= $version), "* ]] || fail "glassbox-cuda must depend on glassbox (= $version): $cuda_depends"
  if grep -qi "cuda\|cublas" <<<"${cuda_depends#glassbox (= $version)}"; then
    fail "glassbox-cuda names a CUDA library (not a Debian package): $cuda_depends"
  fi
  listing=$(dpkg-deb -c "$cuda_deb")
  grep -q "./usr/lib/glassbox/libglassbox-cuda.so$" <<<"$listing" || fail "glassbox-cuda has no plugin"
fi
if command -v lintian >/dev/null; then
  lintian --fail-on error --tag-display-limit 0 "$deb" $cuda_deb
  echo "package.sh: lintian: no errors"
else
  echo "package.sh: lintian is not installed (not root): skipped" >&2
fi

# Runs the installed programs under PREFIX; a fresh HOME, so no session reopens another model.
check_installed() {
  local prefix="$1" with_cuda="$2" home
  home=$(mktemp -d)
  local starter="$prefix/share/glassbox/models/stories260K/stories260K.bin"
  [[ -f "$starter" ]] || { echo "package.sh: no starter model at $starter" >&2; return 1; }
  HOME="$home" "$prefix/bin/glassbox-cli" generate --model "$starter" --prompt "Once upon a time" --max-tokens 16 \
    --temperature 0 > "$home/generate.txt"
  grep -q "Once upon a time" "$home/generate.txt" || { echo "package.sh: generate printed no story" >&2; return 1; }
  # The shipped model catalog is found beside the installed program (no user copy in a fresh home).
  HOME="$home" XDG_DATA_HOME="$home/data" "$prefix/bin/glassbox-cli" models catalog --json > "$home/catalog.json"
  grep -q "\"catalog\": \"$prefix/share/glassbox/catalog.json\"" "$home/catalog.json" ||
    { echo "package.sh: models catalog did not read $prefix/share/glassbox/catalog.json" >&2; return 1; }
  # No --model: it must open the starter on its own; with a prompt the run ends
  # (exit 0) only once an answer came, so a workbench without a model fails here.
  HOME="$home" QT_QPA_PLATFORM=offscreen "$prefix/bin/glassbox" --screenshot "$home/window.png" \
    --prompt "Once upon a time" --max-tokens 8
  [[ -s "$home/window.png" ]] || { echo "package.sh: the workbench wrote no screenshot" >&2; return 1; }
  for program in glassbox glassbox-cli; do
    if readelf -d "$prefix/bin/$program" | grep NEEDED | grep -qi "cuda\|cublas"; then
      echo "package.sh: $prefix/bin/$program links a CUDA library" >&2; return 1
    fi
  done
  # The CUDA backend: "not installed" without the plugin; with it, the plugin
  # loads (then a GPU machine runs, any other names what it lacks).
  local cuda_out status=0
  cuda_out=$(HOME="$home" "$prefix/bin/glassbox-cli" generate --model "$starter" --prompt "Once" --max-tokens 2 \
    --device cuda 2>&1) || status=$?
  if [[ "$with_cuda" -eq 0 ]]; then
    [[ $status -ne 0 && "$cuda_out" == *"the CUDA backend is not installed"*"glassbox-cuda"* ]] ||
      { echo "package.sh: --device cuda without glassbox-cuda: $cuda_out" >&2; return 1; }
  elif [[ $status -ne 0 ]]; then
    [[ "$cuda_out" == *"--device cuda: "* && "$cuda_out" != *"not installed"* && "$cuda_out" != *"CUDA plugin"* ]] ||
      { echo "package.sh: --device cuda with glassbox-cuda: $cuda_out" >&2; return 1; }
  fi
  echo "package.sh: $prefix/bin/glassbox-cli generated and read the shipped catalog, $prefix/bin/glassbox opened the starter model;" \
    "--device cuda: ${cuda_out##*$'\n'}"
  rm -rf "$home"
}

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
dpkg-deb -x "$deb" "$scratch"
check_installed "$scratch/usr" 0
if [[ -n "$cuda_deb" ]]; then
  dpkg-deb -x "$cuda_deb" "$scratch"
  check_installed "$scratch/usr" 1
fi
if [[ $install_here -eq 1 ]]; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$deb" >/dev/null
  check_installed /usr 0
  dpkg -L glassbox | grep -q /usr/share/mime/packages/glassbox.xml
  if [[ -n "$cuda_deb" ]]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$cuda_deb" >/dev/null
    check_installed /usr 1
    DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq glassbox-cuda >/dev/null
  fi
  echo "package.sh: installed with apt; /usr/bin/glassbox and glassbox-cli run"
fi
