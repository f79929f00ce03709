#!/usr/bin/env bash
# tools/device-check-rehearsal.sh: runs tools/device-check.sh here the way the
# lent GPU machine will, to show that what a run carries is enough to build and
# that a run without a working GPU cannot pass.
#
# A clean Debian 12 root (debootstrap --variant=minbase bookworm) gets only the
# groups [toolchain] and [device-image] of tools/packages.txt (what the GPU
# image has: compilers, CMake, Ninja, Python; no pkg-config, no library -dev
# package), plus ccache to make reruns fast (it adds no library the build uses;
# GLASSBOX_REHEARSAL_CCACHE=0 leaves it out). The root is cached under
# /var/tmp/glassbox-rehearsal (GLASSBOX_REHEARSAL_DIR) and rebuilt when the
# groups change. Each run copies the tree into it (git archive of HEAD, or with
# --worktree the tracked and untracked-not-ignored files, as the run tool
# sends them) with the carried .deps/debs and .devdata made by
# `tools/device-check.sh --prepare-deps`, bind-mounts CUDA (/usr/local/cuda,
# read-only) and the ccache folder, and runs tools/device-check.sh inside.
# Everything mounted is unmounted on exit.
#
# There is no GPU here, so the run must end like this, and the script exits 0
# only then: deps ok with every dependency from the carried .debs, configure
# ok, build ok (glassbox-cli, the CUDA plugin it opens, glassbox_cuda_bench,
# the CUDA test executable; glassbox-cli then starts inside the root), ctest_cuda failed with a failure
# that names GLASSBOX_REQUIRE_GPU, no stage that needs the device ok, overall
# failed.
#
#   tools/device-check-rehearsal.sh [--skip-bench] [--worktree]
#     --skip-bench   leave the benchmark stages out (the synthetic 1.1B model
#                    and its quantization take minutes on a small machine)
# Needs root (debootstrap, chroot, mount). GLASSBOX_REHEARSAL_JOBS (default 2)
# sets the build's parallelism.
set -euo pipefail

SKIP_BENCH=0
TREE="head"
for arg in "$@"; do
  case "$arg" in
    --skip-bench) SKIP_BENCH=1 ;;
    --worktree) TREE=worktree ;;
    *) echo "usage: tools/device-check-rehearsal.sh [--skip-bench] [--worktree]" >&2; exit 2 ;;
  esac
done
[[ $(id -u) -eq 0 ]] || { echo "rehearsal: needs root (debootstrap, chroot, mount)" >&2; exit 2; }
REPO="$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)"
CACHE="${GLASSBOX_REHEARSAL_DIR:-/var/tmp/glassbox-rehearsal}"
CUDA_DIR="$(readlink -f /usr/local/cuda)"
[[ -x "$CUDA_DIR/bin/nvcc" ]] || { echo "rehearsal: no CUDA toolkit under /usr/local/cuda" >&2; exit 2; }
if [[ ! -f "$REPO/.deps/manifest.txt" || ! -d "$REPO/.devdata" ]]; then
  echo "rehearsal: no .deps/ or .devdata/: run tools/device-check.sh --prepare-deps first" >&2
  exit 2
fi
START_S=$SECONDS
log() { echo "[rehearsal +$((SECONDS - START_S))s] $*" >&2; }

# --- mounts, always undone ---------------------------------------------------------
MOUNTS=()
mount_at() {  # mount_at TARGET MOUNT-ARGS...: mounts and remembers TARGET
  local target="$1"
  shift
  mkdir -p "$target"
  mount "$@" "$target"
  MOUNTS+=("$target")
}
unmount_all() {
  local i
  for ((i = ${#MOUNTS[@]} - 1; i >= 0; --i)); do
    umount "${MOUNTS[i]}" 2> /dev/null || umount -l "${MOUNTS[i]}" || echo "rehearsal: cannot unmount ${MOUNTS[i]}" >&2
  done
  MOUNTS=()
}
trap unmount_all EXIT
trap 'exit 130' INT TERM
# Refuses to go on while anything is mounted under DIR (so rm -rf never reaches
# /dev or CUDA through a bind mount).
assert_unmounted() {
  if awk '{ print $2 }' /proc/mounts | grep -q -F "$1/"; then
    echo "rehearsal: something is still mounted under $1; unmount it first" >&2
    exit 1
  fi
}

# --- the clean root, cached ---------------------------------------------------------
packages=()
mapfile -t packages < <("$REPO/tools/packages.sh" toolchain device-image)
[[ "${GLASSBOX_REHEARSAL_CCACHE:-1}" == 1 ]] && packages+=(ccache)
key="$(printf '%s\n' bookworm minbase "${packages[@]}" | sha256sum | cut -c 1-12)"
ROOTFS="$CACHE/root-$key"
if [[ ! -f "$ROOTFS/.rehearsal-ready" ]]; then
  command -v debootstrap > /dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap
  log "building the root $ROOTFS: debootstrap minbase bookworm, then ${packages[*]}"
  mkdir -p "$CACHE"
  assert_unmounted "$ROOTFS.tmp"
  rm -rf "$ROOTFS.tmp"
  # The mirror: GLASSBOX_REHEARSAL_MIRROR, else debootstrap's default.
  debootstrap --variant=minbase bookworm "$ROOTFS.tmp" ${GLASSBOX_REHEARSAL_MIRROR:+"$GLASSBOX_REHEARSAL_MIRROR"} > "$CACHE/debootstrap.log" 2>&1 ||
    { tail -n 20 "$CACHE/debootstrap.log" >&2; exit 1; }
  cp /etc/resolv.conf "$ROOTFS.tmp/etc/resolv.conf"
  mount_at "$ROOTFS.tmp/proc" -t proc proc
  mount_at "$ROOTFS.tmp/dev" --bind /dev
  chroot "$ROOTFS.tmp" /usr/bin/env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  chroot "$ROOTFS.tmp" /usr/bin/env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -qq --no-install-recommends "${packages[@]}" > "$CACHE/apt.log" 2>&1 ||
    { tail -n 20 "$CACHE/apt.log" >&2; exit 1; }
  chroot "$ROOTFS.tmp" apt-get clean
  unmount_all
  touch "$ROOTFS.tmp/.rehearsal-ready"
  assert_unmounted "$ROOTFS"
  rm -rf "$ROOTFS"
  mv "$ROOTFS.tmp" "$ROOTFS"
  log "root ready ($(du -sh "$ROOTFS" | cut -f 1))"
fi
# What the root must not have: the check is only worth something without them.
for p in pkg-config pkgconf libsentencepiece-dev libcurl4-openssl-dev libboost-dev nlohmann-json3-dev; do
  # shellcheck disable=SC2016  # dpkg-query's format, not the shell's
  if chroot "$ROOTFS" dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q "install ok installed"; then
    echo "rehearsal: the root has $p; it must not (rm -rf $ROOTFS to rebuild it)" >&2
    exit 1
  fi
done

# --- a fresh copy of the tree and what a run carries -----------------------------------
assert_unmounted "$ROOTFS"
WORKDIR="$ROOTFS/work"
rm -rf "$WORKDIR"
mkdir -p "$WORKDIR/glassbox/.deps" "$WORKDIR/out"
if [[ "$TREE" == head ]]; then
  git -C "$REPO" archive HEAD | tar -x -C "$WORKDIR/glassbox"
  commit="$(git -C "$REPO" rev-parse --short HEAD)"
else
  # Files deleted but not yet committed are listed too: cp skips them.
  (cd "$REPO" && git ls-files -z -c -o --exclude-standard | { xargs -0 -r cp --parents -a -t "$WORKDIR/glassbox" 2> /dev/null || true; })
  commit="$(git -C "$REPO" rev-parse --short HEAD)+worktree"
fi
cp -a "$REPO/.deps/debs" "$REPO/.deps/manifest.txt" "$WORKDIR/glassbox/.deps/"
cp -a "$REPO/.devdata" "$WORKDIR/glassbox/"
tree_b="$(du -sb "$WORKDIR/glassbox" --exclude=.deps --exclude=.devdata | cut -f 1)"
deps_b="$(du -sb "$WORKDIR/glassbox/.deps" | cut -f 1)"
data_b="$(du -sb "$WORKDIR/glassbox/.devdata" | cut -f 1)"
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
CARRIED="tree $(mib "$tree_b") + .deps $(mib "$deps_b") + .devdata $(mib "$data_b") = $(mib $((tree_b + deps_b + data_b))) MiB"
log "copied $commit: $CARRIED"

# --- the run --------------------------------------------------------------------------
mount_at "$ROOTFS/proc" -t proc proc
mount_at "$ROOTFS/dev" --bind /dev
mount_at "$ROOTFS$CUDA_DIR" --bind "$CUDA_DIR"
mount -o remount,bind,ro "$ROOTFS$CUDA_DIR"
[[ "$CUDA_DIR" == /usr/local/cuda ]] || ln -sfn "$CUDA_DIR" "$ROOTFS/usr/local/cuda"
env_args=(HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8
  OUT=/work/out GLASSBOX_DEVICE_CHECK_COMMIT="$commit" GLASSBOX_DEVICE_CHECK_JOBS="${GLASSBOX_REHEARSAL_JOBS:-2}"
  # Two cores instead of sixteen: every limit 40 times longer.
  GLASSBOX_DEVICE_CHECK_BUDGET_S=14400 GLASSBOX_DEVICE_CHECK_LIMIT_SCALE=40)
((SKIP_BENCH)) && env_args+=(GLASSBOX_DEVICE_CHECK_SKIP=bench)
if chroot "$ROOTFS" sh -c 'command -v ccache' > /dev/null; then
  mkdir -p "$CACHE/ccache"
  mount_at "$ROOTFS/ccache" --bind "$CACHE/ccache"
  env_args+=(CCACHE_DIR=/ccache CCACHE_BASEDIR=/work/glassbox CCACHE_MAXSIZE=4G
    CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
log "running tools/device-check.sh in the root (log: $WORKDIR/out/device-check.log)"
rc=0
chroot "$ROOTFS" /usr/bin/env -i "${env_args[@]}" /bin/bash -c 'cd /work/glassbox && exec tools/device-check.sh' || rc=$?
log "device-check.sh exited $rc"
# glassbox-cli starts inside the root: its carried libraries resolve at run time.
cli_ok=1
chroot "$ROOTFS" /work/glassbox/build/gpu/app/glassbox-cli --version > "$WORKDIR/out/cli-version.txt" 2>&1 || cli_ok=0
unmount_all

# --- what the run must have shown ------------------------------------------------------
if ! python3 - "$WORKDIR/out/summary.json" "$WORKDIR/glassbox/build/gpu" "$cli_ok" << 'PY'; then
import json, os, sys

summary_path, build, cli_ok = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
problems = []
try:
    summary = json.load(open(summary_path))
except (OSError, ValueError) as e:
    sys.exit(f"rehearsal: no readable summary.json: {e}")
stages = summary["stages"]
by_name = {s["name"]: s for s in stages}

def status(name):
    return by_name.get(name, {}).get("status", "absent")

for s in stages:
    print(f"  {s['name']:<28} {s['status']:<14} {s['seconds']:>5}s  {s['detail'][:110]}")
for name in ("deps", "configure", "build"):
    if status(name) != "ok":
        problems.append(f"stage {name} is {status(name)}, not ok")
if not summary["deps"] or any(v != "carried" for v in summary["deps"].values()):
    problems.append(f"not every dependency came from the carried .debs: {summary['deps']}")
for target in ("app/glassbox-cli", "lib/glassbox/libglassbox-cuda.so", "tests/kernels/cuda/glassbox_cuda_bench",
               "tests/kernels/cuda/glassbox_tests_kernels_cuda"):
    if not os.access(os.path.join(build, target), os.X_OK):
        problems.append(f"not built: {target}")
if not cli_ok:
    problems.append("glassbox-cli --version failed inside the root (cli-version.txt)")
ctest = by_name.get("ctest_cuda")
if not ctest or not ctest["status"].startswith("failed"):
    problems.append(f"ctest_cuda is {status('ctest_cuda')}, not failed")
elif "GLASSBOX_REQUIRE_GPU" not in ctest["detail"]:
    problems.append(f"ctest_cuda's failure does not name GLASSBOX_REQUIRE_GPU: {ctest['detail']!r}")
# Without a device nothing that needs one may pass (synth and quantize run on the CPU).
names = [s["name"] for s in stages]
after_build = names[names.index("build") + 1:] if "build" in names else []
passed = [n for n in after_build if status(n) == "ok" and n not in ("synth", "quantize_q4_k_m")]
if passed:
    problems.append(f"stages that need a GPU passed without one: {passed}")
if summary["overall"] != "failed":
    problems.append(f"overall is {summary['overall']}, not failed")
for p in problems:
    print(f"rehearsal: FAIL: {p}", file=sys.stderr)
sys.exit(1 if problems else 0)
PY
  log "FAILED (see $WORKDIR/out)"
  exit 1
fi
log "passed: self-contained build, and no pass without a GPU ($CARRIED; $((SECONDS - START_S))s)"
