#!/usr/bin/env bash
# tools/device-check.sh: the one script run on the lent GPU machine (H100/H200,
# CUDA 13 under /usr/local/cuda, CMake, Ninja, gcc, Python; no Qt, none of the
# build's libraries, no network). Run it from the repository root with $OUT set;
# everything it learns lands in $OUT, six files (the run tool brings back at
# most eight):
#
#   summary.json       overall status; for each stage {name, status, seconds,
#                      detail}; where each dependency came from; the shared
#                      data used; "not_run": what was deliberately left out
#   device-check.log   full log of every command
#   nvidia-smi.txt     the machine
#   ctest-cuda.xml     JUnit report of `ctest -L cuda`
#   sanitizers.txt     compute-sanitizer reports, one section per stage:
#                      memcheck and initcheck of the kernel, quant, attention
#                      and one backend test; racecheck of the kernel, quant and
#                      attention tests (their kernels share memory in a block)
#   bench.json         one object, a member per benchmark:
#                      quant-llama-Q4_K_M / -Q8_0 and quant-tinyllama-q4_k_m-p512
#                      (glassbox-cli bench --device cuda on quantized weights:
#                      the small quant-llama files of the shared data, and the
#                      synthetic tinyllama-1.1b quantized to Q4_K_M by
#                      glassbox-cli quantize), cuda-bench (glassbox_cuda_bench:
#                      decode tok/s at batch 1/8/32/64, TTFT for 512/2048-token
#                      prompts, batch-1 roofline ratio), cli-p512 / cli-p2048
#                      (glassbox-cli bench on the synthetic F16 model)
#
# Honest results: GLASSBOX_REQUIRE_GPU=1 is exported, so a CUDA test that finds
# no usable device fails instead of skipping (tests/kernels/cuda/
# cuda_test_support.cpp), and the ctest stage fails when the JUnit report shows
# any skipped test or no test at all.
#
# Budget: about 8 minutes in all. Each stage has a time limit and is skipped
# (which fails the run) when the remaining budget cannot hold it; a failed stage
# does not stop the stages that do not depend on it. The order of the stages is
# their priority: tests, sanitizers, then benchmarks.
#
# Dependencies: the build's libraries (tools/packages.txt, [headless]) are taken
# from the system when it has every one of them; otherwise from Debian 12 .debs
# carried in .deps/debs, unpacked with dpkg -x into .deps/root (never into /)
# and pointed at through pkg-config, CMAKE_PREFIX_PATH and the linker's rpath.
# Shared test data: $GLASSBOX_SHARED_DIR, else the carried .devdata/ (the files
# of tools/device-data.txt), else shared/ in the tree, else ../shared. On the
# Debian 12 development machine, before a run:
#     tools/device-check.sh --prepare-deps   # .deps/ (.debs + manifest) and .devdata/
#     tools/device-check.sh --prepare-data   # only .devdata/
# then run with the run tool's carry: [".deps", ".devdata"] (both git-ignored).
# tools/device-check-rehearsal.sh runs the whole script in a clean Debian root
# with only the toolchain, to show the carried set is enough.
#
# Other modes and knobs:
#     tools/device-check.sh --configure-only     deps + configure, then stop
#     GLASSBOX_DEVICE_CHECK_FORCE_DEPS=1          use the carried .debs even if the system has everything
#     GLASSBOX_DEVICE_CHECK_SKIP="bench sanitizers"  leave these stage groups out (named in "not_run")
#     GLASSBOX_DEVICE_CHECK_BUILD (build dir, default build/gpu), GLASSBOX_DEVICE_CHECK_BUDGET_S
#     (default 480), GLASSBOX_DEVICE_CHECK_LIMIT_SCALE (multiplies every stage's limit, default 1),
#     GLASSBOX_DEVICE_CHECK_JOBS (default nproc), GLASSBOX_DEVICE_CHECK_COMMIT (when the
#     tree has no .git), GLASSBOX_CUDA_ARCH (default 90).
set -uo pipefail

ROOT="$(pwd)"
if [[ ! -f "$ROOT/CMakeLists.txt" || ! -d "$ROOT/kernels/cuda" ]]; then
  echo "device-check: run from the repository root" >&2
  exit 2
fi
TOOLS="$ROOT/tools"
DEPS_DIR="$ROOT/.deps"
DEPS_ROOT="$DEPS_DIR/root"
DATA_DIR="$ROOT/.devdata"
MAX_DEBS_MIB=25
CARRY_LIMIT_MIB=64

mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
bytes_of() { du -scb "$@" 2> /dev/null | tail -n 1 | cut -f 1; }

# matches_any NAME GLOB...: whether NAME matches one of the globs.
matches_any() {
  local name="$1" glob
  shift
  for glob in "$@"; do
    # shellcheck disable=SC2053  # the right-hand side is a glob on purpose
    [[ "$name" == $glob ]] && return 0
  done
  return 1
}

# --- preparation, on the Debian 12 development machine ---------------------------

# .deps/debs: the .debs of [headless] and everything apt would install with them
# into an empty root, less what the GPU image has ([device-image-has]) and what
# nothing links ([carry-prune]); .deps/manifest.txt names each with its size.
prepare_debs() {
  local debs="$DEPS_DIR/debs" status closure
  if ! command -v apt-get > /dev/null || ! command -v dpkg-deb > /dev/null; then
    echo "device-check: --prepare-deps needs apt-get and dpkg-deb (Debian 12)" >&2
    return 1
  fi
  local -a wanted image_has prune carried=() left_image=() left_prune=()
  mapfile -t wanted < <("$TOOLS/packages.sh" headless) && ((${#wanted[@]})) || return 1
  mapfile -t image_has < <("$TOOLS/packages.sh" device-image-has) || return 1
  mapfile -t prune < <("$TOOLS/packages.sh" carry-prune) || return 1
  rm -rf "$DEPS_DIR"
  mkdir -p "$debs"
  # What apt would install into a root with nothing installed (an empty dpkg
  # status file): the resolved closure, virtual packages and alternatives chosen.
  status="$(mktemp)"
  closure="$(apt-get -s -o Dir::State::Status="$status" -o APT::Install-Recommends=0 install "${wanted[@]}" 2>&1)"
  local rc=$?
  rm -f "$status"
  ((rc == 0)) || { echo "$closure" >&2; return 1; }
  local pkg ver
  while read -r pkg ver; do
    if matches_any "$pkg" "${image_has[@]}"; then
      left_image+=("$pkg")
    elif matches_any "$pkg" "${prune[@]}"; then
      left_prune+=("$pkg")
    else
      carried+=("$pkg=$ver")
    fi
  done < <(awk '$1 == "Inst" { v = $3; gsub(/[()]/, "", v); print $2, v }' <<< "$closure")
  local -a sandbox=()
  [[ $(id -u) -eq 0 ]] && sandbox=(-o APT::Sandbox::User=root)
  if ! (cd "$debs" && apt-get download -q=2 "${sandbox[@]}" "${carried[@]}"); then
    echo "device-check: apt-get download failed (stale package lists? run apt-get update)" >&2
    return 1
  fi
  local deb total
  {
    echo "# The .debs tools/device-check.sh unpacks on the GPU machine when it lacks a"
    echo "# dependency of the headless build: tools/packages.txt [headless] and its closure."
    echo "# made: $(date -u +%Y-%m-%dT%H:%MZ) on $(sed -n 's/^PRETTY_NAME=//p' /etc/os-release | tr -d '"')"
    echo "# arch: $(dpkg --print-architecture)"
    echo "# glibc: $(dpkg-query -W -f '${Version}' libc6 | sed 's/-.*//')"
    echo "# package version bytes"
    for deb in "$debs"/*.deb; do
      echo "$(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version) $(stat -c %s "$deb")"
    done | sort -k3,3nr
    echo "# left out, the GPU image has them ([device-image-has]): ${left_image[*]}"
    echo "# left out, nothing links them ([carry-prune]): ${left_prune[*]}"
  } > "$DEPS_DIR/manifest.txt"
  total="$(bytes_of "$debs"/*.deb)"
  echo "device-check: $DEPS_DIR/debs: ${#carried[@]} .debs, $(mib "$total") MiB" \
    "(left out: ${#left_image[@]} the image has, ${#left_prune[@]} pruned); manifest $DEPS_DIR/manifest.txt"
  if ((total > MAX_DEBS_MIB * 1048576)); then
    echo "device-check: the .debs are over $MAX_DEBS_MIB MiB; prune the closure ([carry-prune] in tools/packages.txt)" >&2
    return 1
  fi
}

# .devdata: the shared files of tools/device-data.txt, same relative paths.
prepare_data() {
  local src="${GLASSBOX_SHARED_DIR:-$ROOT/../shared}" rel missing=()
  rm -rf "$DATA_DIR"
  while read -r rel; do
    rel="${rel%%#*}"
    rel="${rel//[[:space:]]/}"
    [[ -n "$rel" ]] || continue
    if [[ -f "$src/$rel" ]]; then
      mkdir -p "$DATA_DIR/$(dirname "$rel")"
      cp "$src/$rel" "$DATA_DIR/$rel"
    else
      missing+=("$rel")
    fi
  done < "$TOOLS/device-data.txt"
  if ((${#missing[@]})); then
    echo "device-check: not in $src: ${missing[*]}" >&2
    return 1
  fi
  chmod -R u+w "$DATA_DIR"
  echo "device-check: $DATA_DIR: $(mib "$(bytes_of "$DATA_DIR")") MiB from $src"
}

# What one run carries: the tracked tree plus .deps and .devdata.
print_carry_size() {
  local tree=0 deps data total
  if git -C "$ROOT" rev-parse --git-dir > /dev/null 2>&1; then
    tree="$(git -C "$ROOT" ls-files -z | (cd "$ROOT" && xargs -0 stat -c %s 2> /dev/null) | awk '{ s += $1 } END { print s + 0 }')"
  fi
  deps="$(bytes_of "$DEPS_DIR")"
  data="$(bytes_of "$DATA_DIR")"
  total=$((tree + deps + data))
  echo "device-check: carried: tree $(mib "$tree") + .deps $(mib "$deps") + .devdata $(mib "$data") = $(mib "$total") MiB (limit $CARRY_LIMIT_MIB)"
  ((total < CARRY_LIMIT_MIB * 1048576)) || { echo "device-check: over the run tool's $CARRY_LIMIT_MIB MiB" >&2; return 1; }
}

case "${1:-}" in
  --prepare-deps)
    prepare_debs && prepare_data && print_carry_size
    exit $?
    ;;
  --prepare-data)
    prepare_data && print_carry_size
    exit $?
    ;;
esac
CONFIGURE_ONLY=0
[[ "${1:-}" == "--configure-only" ]] && CONFIGURE_ONLY=1

# --- the run ------------------------------------------------------------------------
OUT="${OUT:-$ROOT/build/device-check-out}"
mkdir -p "$OUT"
rm -f "$OUT"/{summary.json,nvidia-smi.txt,ctest-cuda.xml,sanitizers.txt,bench.json}  # a local rerun's leftovers
LOG="$OUT/device-check.log"
: > "$LOG"
BUILD="${GLASSBOX_DEVICE_CHECK_BUILD:-$ROOT/build/gpu}"
WORK="${GLASSBOX_DEVICE_CHECK_WORK:-$BUILD/device-check}"
BUDGET_S="${GLASSBOX_DEVICE_CHECK_BUDGET_S:-480}"
LIMIT_SCALE="${GLASSBOX_DEVICE_CHECK_LIMIT_SCALE:-1}"
SKIP="${GLASSBOX_DEVICE_CHECK_SKIP:-}"
SKIP=" ${SKIP//,/ } "
START_S=$SECONDS
JOBS="${GLASSBOX_DEVICE_CHECK_JOBS:-$(nproc 2> /dev/null || echo 4)}"
export PATH="/usr/local/cuda/bin:$PATH"
rm -rf "$WORK/stages" "$WORK/bench"
mkdir -p "$WORK/stages" "$WORK/bench"

declare -a STAGE_NAMES=() STAGE_STATUS=() STAGE_SECONDS=() STAGE_DETAIL=() NOT_RUN=() DEP_LINES=()
OVERALL=ok
SHARED=""
SHARED_FROM=""

log() { echo "[device-check +$((SECONDS - START_S))s] $*" | tee -a "$LOG" >&2; }
remaining() { echo $((BUDGET_S - (SECONDS - START_S))); }
wants() {  # wants GROUP: false, and named in "not_run", when GLASSBOX_DEVICE_CHECK_SKIP lists it
  [[ "$SKIP" == *" $1 "* ]] || return 0
  NOT_RUN+=("the $1 stages (GLASSBOX_DEVICE_CHECK_SKIP)")
  return 1
}
stage_status() {  # stage_status NAME: the recorded status of stage NAME
  local i
  for ((i = 0; i < ${#STAGE_NAMES[@]}; ++i)); do
    [[ "${STAGE_NAMES[i]}" == "$1" ]] && echo "${STAGE_STATUS[i]}"
  done
}

record() {  # record NAME STATUS SECONDS [DETAIL]
  STAGE_NAMES+=("$1")
  STAGE_STATUS+=("$2")
  STAGE_SECONDS+=("$3")
  STAGE_DETAIL+=("${4:-}")
  [[ "$2" == ok ]] || OVERALL=failed
}

# fail_stage NAME STATUS DETAIL: turns an already recorded stage into a failure.
fail_stage() {
  local i
  for ((i = ${#STAGE_NAMES[@]} - 1; i >= 0; --i)); do
    if [[ "${STAGE_NAMES[i]}" == "$1" ]]; then
      STAGE_STATUS[i]="$2"
      STAGE_DETAIL[i]="$3${STAGE_DETAIL[i]:+; ${STAGE_DETAIL[i]}}"
      OVERALL=failed
      log "stage $1: $2: $3"
      return
    fi
  done
}

# The line that says why a stage failed: a test's FAIL!, a sanitizer's error,
# a compiler's or CMake's error, else the last line.
failure_line() {
  local line
  line="$(grep -m 1 -E 'FAIL!|^========= (Invalid|Uninitialized|Error|Race|Program hit|Leaked|Target application)|CMake Error|error:|FAILED:|No tests were found' "$1")" ||
    line="$(tail -n 1 "$1")"
  echo "${line:0:400}"
}

# run_stage NAME LIMIT_S CMD...: runs CMD with a time limit (times
# GLASSBOX_DEVICE_CHECK_LIMIT_SCALE, capped by the budget). Its output goes to
# $WORK/stages/NAME.txt and, unless STAGE_QUIET=1, to the log.
STAGE_QUIET=0
run_stage() {
  local name="$1" limit=$(($2 * LIMIT_SCALE))
  shift 2
  local left
  left="$(remaining)"
  if ((left < 20)); then
    log "stage $name: skipped, budget spent"
    record "$name" skipped 0 "the ${BUDGET_S}s budget was spent"
    return 1
  fi
  ((limit > left)) && limit=$left
  log "stage $name (limit ${limit}s): $*"
  local t0=$SECONDS rc out="$WORK/stages/$name.txt"
  timeout --kill-after=10 "$limit" "$@" > "$out" 2>&1
  rc=$?
  if ((STAGE_QUIET)); then echo "(output: sanitizers.txt)" >> "$LOG"; else cat "$out" >> "$LOG"; fi
  local status=ok detail=""
  if ((rc == 124 || rc == 137)); then
    status=timeout
    detail="no result within ${limit}s"
  elif ((rc != 0)); then
    status="failed($rc)"
    detail="$(failure_line "$out")"
  fi
  log "stage $name: $status in $((SECONDS - t0))s${detail:+: $detail}"
  record "$name" "$status" $((SECONDS - t0)) "$detail"
  [[ "$status" == ok ]]
}

json_str() {  # json_str TEXT: TEXT as a JSON string, control characters dropped
  local s="$1"
  s="${s//\\/\\\\}"
  s="${s//\"/\\\"}"
  printf '"%s"' "$(printf '%s' "$s" | tr -d '\000-\037')"
}

write_summary() {
  local i n=${#STAGE_NAMES[@]} comma complete=true
  ((${#NOT_RUN[@]})) && complete=false
  {
    echo "{"
    echo "  \"overall\": \"$OVERALL\","
    echo "  \"complete\": $complete,"
    echo "  \"seconds\": $((SECONDS - START_S)),"
    echo "  \"commit\": $(json_str "${GLASSBOX_DEVICE_CHECK_COMMIT:-$(git -C "$ROOT" rev-parse --short HEAD 2> /dev/null || echo unknown)}"),"
    echo "  \"shared_data\": $(json_str "$SHARED ($SHARED_FROM)"),"
    echo "  \"deps\": {"
    for ((i = 0; i < ${#DEP_LINES[@]}; ++i)); do
      comma=","
      ((i == ${#DEP_LINES[@]} - 1)) && comma=""
      echo "    $(json_str "${DEP_LINES[i]%% *}"): $(json_str "${DEP_LINES[i]#* }")$comma"
    done
    echo "  },"
    echo "  \"not_run\": ["
    for ((i = 0; i < ${#NOT_RUN[@]}; ++i)); do
      comma=","
      ((i == ${#NOT_RUN[@]} - 1)) && comma=""
      echo "    $(json_str "${NOT_RUN[i]}")$comma"
    done
    echo "  ],"
    echo "  \"stages\": ["
    for ((i = 0; i < n; ++i)); do
      comma=","
      ((i == n - 1)) && comma=""
      echo "    {\"name\": \"${STAGE_NAMES[i]}\", \"status\": \"${STAGE_STATUS[i]}\", \"seconds\": ${STAGE_SECONDS[i]}, \"detail\": $(json_str "${STAGE_DETAIL[i]}")}$comma"
    done
    echo "  ]"
    echo "}"
  } > "$OUT/summary.json"
  log "summary: $OUT/summary.json (overall $OVERALL)"
}

# sanitizers.txt and bench.json: the many small reports as two files.
merge_reports() {
  local f name n=0
  for f in "$WORK"/stages/memcheck_*.txt "$WORK"/stages/initcheck_*.txt "$WORK"/stages/racecheck_*.txt; do
    [[ -f "$f" ]] || continue
    name="$(basename "$f" .txt)"
    if ((n++ == 0)); then : > "$OUT/sanitizers.txt"; fi
    {
      echo "===== $name: $(stage_status "$name") ====="
      if (($(wc -l < "$f") > 600)); then
        head -n 500 "$f"
        echo "[... $(($(wc -l < "$f") - 550)) lines cut ...]"
        tail -n 50 "$f"
      else
        cat "$f"
      fi
      echo
    } >> "$OUT/sanitizers.txt"
  done
  n=0
  for f in "$WORK"/bench/*.json; do
    [[ -s "$f" ]] || continue
    if ((n++ == 0)); then echo "{" > "$OUT/bench.json"; else echo "," >> "$OUT/bench.json"; fi
    printf '%s: ' "$(json_str "$(basename "$f" .json)")" >> "$OUT/bench.json"
    cat "$f" >> "$OUT/bench.json"
  done
  ((n)) && echo "}" >> "$OUT/bench.json"
}
trap 'merge_reports; write_summary' EXIT

# --- 0. the machine ----------------------------------------------------------
if command -v nvidia-smi > /dev/null; then
  nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
else
  echo "nvidia-smi not found" > "$OUT/nvidia-smi.txt"
fi
nvcc --version >> "$LOG" 2>&1 || log "nvcc not found on PATH"

# --- 1. dependencies: the system's, else the carried .debs -----------------------
MULTIARCH="$(gcc -print-multiarch 2> /dev/null)"
[[ -n "$MULTIARCH" ]] || MULTIARCH=x86_64-linux-gnu
CMAKE_EXTRA=()

# The build's dependencies (CMakeLists.txt's find_package / pkg_check_modules,
# tools/packages.txt [headless]): NAME, what shows a root has it, and its name there.
DEP_CHECKS=(
  "pkg-config command pkg-config"
  "sentencepiece pkg-config sentencepiece"
  "pcre2 pkg-config libpcre2-8"
  "nlohmann-json cmake-config nlohmann_json"
  "CLI11 cmake-config CLI11"
  "cpp-httplib pkg-config cpp-httplib"
  "boost header boost/beast.hpp"
  "libcurl pkg-config libcurl"
)

# dep_present KIND WHAT [ROOT]: whether the system (or the unpacked ROOT) has it.
# With ROOT, PATH and PKG_CONFIG_* already point into it.
dep_present() {
  local kind="$1" what="$2" root="${3:-}" dir
  case "$kind" in
    command) command -v "$what" > /dev/null ;;
    pkg-config) command -v pkg-config > /dev/null && pkg-config --exists "$what" 2> /dev/null ;;
    cmake-config)
      local -a prefixes=(/usr /usr/local)
      [[ -n "$root" ]] && prefixes=("$root/usr")
      local sub config
      for dir in "${prefixes[@]}"; do
        for sub in share lib lib64 "lib/$MULTIARCH"; do
          for config in "${what}Config.cmake" "${what,,}-config.cmake"; do
            compgen -G "$dir/$sub/cmake/$what*/$config" > /dev/null && return 0
          done
        done
      done
      return 1
      ;;
    header)
      local -a inc=()
      [[ -n "$root" ]] && inc=(-isystem "$root/usr/include/$MULTIARCH" -isystem "$root/usr/include")
      printf '#include <%s>\n' "$what" | c++ -std=c++20 -x c++ -E "${inc[@]}" -o /dev/null - 2> /dev/null
      ;;
  esac
}

# Unpacks every carried .deb into DEPS_ROOT (kept while the manifest is the same).
extract_deb() {
  if command -v dpkg-deb > /dev/null; then
    dpkg-deb -x "$1" "$2"
  else  # ar (binutils) and tar: a .deb is an ar archive holding data.tar.*
    local tmp rc
    tmp="$(mktemp -d)"
    (cd "$tmp" && ar x "$1") && tar -xf "$tmp"/data.tar.* -C "$2"
    rc=$?
    rm -rf "$tmp"
    return $rc
  fi
}
unpack_debs() {
  if [[ -f "$DEPS_ROOT/.manifest" ]] && cmp -s "$DEPS_ROOT/.manifest" "$DEPS_DIR/manifest.txt"; then
    log "dependencies: $DEPS_ROOT already unpacked from this manifest"
    return 0
  fi
  rm -rf "$DEPS_ROOT"
  mkdir -p "$DEPS_ROOT/gb-bin"
  local deb link
  for deb in "$DEPS_DIR"/debs/*.deb; do
    extract_deb "$deb" "$DEPS_ROOT" || { log "dependencies: cannot unpack $deb"; return 1; }
  done
  # An absolute link means the machine's /; inside the root it means the root.
  while IFS= read -r -d '' link; do
    ln -sfn "$DEPS_ROOT$(readlink "$link")" "$link"
  done < <(find "$DEPS_ROOT" -type l -lname '/*' -print0)
  # pkg-config (pkgconf) with its library from the root, for CMake and for us.
  cat > "$DEPS_ROOT/gb-bin/pkg-config" << SH
#!/bin/sh
# pkgconf from the carried .debs (tools/device-check.sh), with its libpkgconf.
LD_LIBRARY_PATH="$DEPS_ROOT/usr/lib/$MULTIARCH\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$DEPS_ROOT/usr/bin/pkgconf" "\$@"
SH
  chmod +x "$DEPS_ROOT/gb-bin/pkg-config"
  cp "$DEPS_DIR/manifest.txt" "$DEPS_ROOT/.manifest"
  log "dependencies: unpacked $(find "$DEPS_DIR/debs" -name '*.deb' | wc -l) .debs into $DEPS_ROOT"
}

# Points the build at DEPS_ROOT: its pkg-config and .pc files (the .pc files
# say prefix=/usr: the sysroot makes that the root's), its CMake packages, its
# include folders on every compile (the multiarch one, where Debian keeps
# openssl/opensslconf.h, is on no .pc file's Cflags: the compiler searches the
# system's by itself), and an rpath to its libraries on every binary. The rpath is DT_RPATH
# (--disable-new-dtags), which the loader also uses for the libraries' own
# needs (libcurl's), and ld uses it to resolve them at link time; no
# LD_LIBRARY_PATH, so CMake, ctest and compute-sanitizer keep the system's.
use_deps_root() {
  local lib="$DEPS_ROOT/usr/lib/$MULTIARCH"
  export PATH="$DEPS_ROOT/gb-bin:$PATH"
  export PKG_CONFIG_LIBDIR="$lib/pkgconfig:$DEPS_ROOT/usr/lib/pkgconfig:$DEPS_ROOT/usr/share/pkgconfig"
  export PKG_CONFIG_SYSROOT_DIR="$DEPS_ROOT"
  unset PKG_CONFIG_PATH
  local link="-Wl,--disable-new-dtags -Wl,-rpath,$lib -Wl,-rpath-link,$lib"
  local include="$DEPS_ROOT/usr/include/$MULTIARCH;$DEPS_ROOT/usr/include"
  CMAKE_EXTRA+=("-DCMAKE_PREFIX_PATH=$DEPS_ROOT/usr" "-DPKG_CONFIG_EXECUTABLE=$DEPS_ROOT/gb-bin/pkg-config"
    "-DCMAKE_C_STANDARD_INCLUDE_DIRECTORIES=$include" "-DCMAKE_CXX_STANDARD_INCLUDE_DIRECTORIES=$include"
    "-DCMAKE_EXE_LINKER_FLAGS=$link" "-DCMAKE_SHARED_LINKER_FLAGS=$link" "-DCMAKE_MODULE_LINKER_FLAGS=$link")
}

deps_stage() {
  local t0=$SECONDS check name kind what missing=()
  if [[ -z "${GLASSBOX_DEVICE_CHECK_FORCE_DEPS:-}" ]]; then
    for check in "${DEP_CHECKS[@]}"; do
      read -r name kind what <<< "$check"
      if dep_present "$kind" "$what"; then DEP_LINES+=("$name system"); else missing+=("$name"); fi
    done
    if ((${#missing[@]} == 0)); then
      log "dependencies: all from the system"
      record deps ok $((SECONDS - t0))
      return 0
    fi
    log "dependencies: the system lacks ${missing[*]}; using the carried .debs for all of them"
  else
    log "dependencies: GLASSBOX_DEVICE_CHECK_FORCE_DEPS: using the carried .debs"
  fi
  DEP_LINES=()
  if ! compgen -G "$DEPS_DIR/debs/*.deb" > /dev/null || [[ ! -f "$DEPS_DIR/manifest.txt" ]]; then
    record deps "failed(missing)" $((SECONDS - t0)) "the system lacks ${missing[*]:-(forced)} and no .deps/debs was carried: run tools/device-check.sh --prepare-deps on the development machine and carry .deps"
    log "dependencies: ${STAGE_DETAIL[-1]}"
    return 1
  fi
  local arch need have
  arch="$(sed -n 's/^# arch: //p' "$DEPS_DIR/manifest.txt")"
  if command -v dpkg > /dev/null && [[ -n "$arch" && "$(dpkg --print-architecture)" != "$arch" ]]; then
    record deps "failed(arch)" $((SECONDS - t0)) "the carried .debs are $arch, this machine is $(dpkg --print-architecture)"
    return 1
  fi
  need="$(sed -n 's/^# glibc: //p' "$DEPS_DIR/manifest.txt")"
  have="$(getconf GNU_LIBC_VERSION 2> /dev/null | awk '{ print $2 }')"
  if [[ -n "$need" && -n "$have" && "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n 1)" != "$need" ]]; then
    log "dependencies: warning: the carried libraries were built for glibc $need, this machine has $have (expect link errors)"
  fi
  unpack_debs || { record deps "failed(unpack)" $((SECONDS - t0)) "could not unpack .deps/debs into $DEPS_ROOT"; return 1; }
  use_deps_root
  missing=()
  for check in "${DEP_CHECKS[@]}"; do
    read -r name kind what <<< "$check"
    if dep_present "$kind" "$what" "$DEPS_ROOT"; then DEP_LINES+=("$name carried"); else missing+=("$name ($kind $what)"); fi
  done
  if ((${#missing[@]})); then
    record deps "failed(missing)" $((SECONDS - t0)) "neither the system nor the carried .debs provide: ${missing[*]}"
    log "dependencies: ${STAGE_DETAIL[-1]}"
    return 1
  fi
  log "dependencies: all from the carried .debs in $DEPS_ROOT"
  record deps ok $((SECONDS - t0))
}
deps_stage || exit 1

# Shared test data (models/, testdata/).
if [[ -n "${GLASSBOX_SHARED_DIR:-}" ]]; then
  SHARED="$GLASSBOX_SHARED_DIR" SHARED_FROM="GLASSBOX_SHARED_DIR"
elif [[ -d "$DATA_DIR/models" ]]; then
  SHARED="$DATA_DIR" SHARED_FROM="carried .devdata: the files of tools/device-data.txt"
elif [[ -d "$ROOT/shared/models" ]]; then
  SHARED="$ROOT/shared" SHARED_FROM="shared/ in the tree"
else
  SHARED="$ROOT/../shared" SHARED_FROM="../shared"
fi
export GLASSBOX_SHARED_DIR="$SHARED"
log "shared data: $SHARED ($SHARED_FROM)"
[[ -d "$SHARED/models/stories260K" ]] || log "warning: no stories260K under $SHARED; the golden tests will fail"

# --- 2. configure and build (headless, CUDA forced on, Release) -------------------
# CMake 3.25's FindCUDAToolkit (Debian 12's) marks CUDA::nvToolsExt deprecated
# without checking that the target exists, and CUDA 13 has no nvToolsExt:
# configure stops there. Later CMake checks first (if(TARGET ...)); with an
# unchecked module, the build uses a copy that checks.
# shellcheck disable=SC2016  # CMake's variables, not the shell's
echo 'message("${CMAKE_ROOT}")' > "$WORK/cmake-root.cmake"
cuda_module="$(cmake -P "$WORK/cmake-root.cmake" 2>&1)/Modules/FindCUDAToolkit.cmake"
if grep -q 'set_property(TARGET CUDA::nvToolsExt' "$cuda_module" 2> /dev/null &&
   ! grep -q 'if(TARGET CUDA::nvToolsExt' "$cuda_module"; then
  mkdir -p "$WORK/cmake-modules"
  # shellcheck disable=SC2016  # CMake's variables, not the shell's
  sed -e 's/if(CMAKE_MINIMUM_REQUIRED_VERSION VERSION_GREATER_EQUAL 3.25)/if(TARGET CUDA::nvToolsExt AND CMAKE_MINIMUM_REQUIRED_VERSION VERSION_GREATER_EQUAL 3.25)/' \
    -e 's|${CMAKE_CURRENT_LIST_DIR}/FindPackageHandleStandardArgs.cmake|${CMAKE_ROOT}/Modules/FindPackageHandleStandardArgs.cmake|' \
    "$cuda_module" > "$WORK/cmake-modules/FindCUDAToolkit.cmake"
  CMAKE_EXTRA+=("-DCMAKE_MODULE_PATH=$WORK/cmake-modules")
  log "cmake: $cuda_module does not check for CUDA::nvToolsExt (none in CUDA 13): using a copy that does"
fi
run_stage configure 90 cmake -S "$ROOT" -B "$BUILD" -G Ninja -DGLASSBOX_UI=OFF -DGLASSBOX_CUDA=ON \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${GLASSBOX_CUDA_ARCH:-90}" -DGLASSBOX_SHARED_DIR="$SHARED" \
  "${CMAKE_EXTRA[@]}" || exit 1
((CONFIGURE_ONLY)) && exit 0
# Every CUDA test is in one executable (tests/glassbox_tests.cmake); its first
# argument names the test. glassbox-cli reaches the device through the CUDA
# plugin (libglassbox-cuda.so, engine/backend/cuda), which it opens at run time
# and so does not build.
TARGETS=(glassbox-cli glassbox_cuda_plugin glassbox_cuda_bench glassbox_tests_kernels_cuda)
run_stage build 240 ninja -C "$BUILD" -j "$JOBS" "${TARGETS[@]}" || exit 1

# --- 3. tests ------------------------------------------------------------------
# A GPU machine: a CUDA test that finds no usable device fails, never skips.
export GLASSBOX_REQUIRE_GPU=1
CUDA_TESTS="$BUILD/tests/kernels/cuda/glassbox_tests_kernels_cuda"

# With the carried data, test_cuda_quant_llama has only some of its files: run
# the cases of those (their names from the test's source), and name the rest.
CTEST_EXCLUDE=()
QUANT_CASES=()
if [[ "$SHARED" == "$DATA_DIR" ]]; then
  CTEST_EXCLUDE=(-E '^test_cuda_quant_llama$')
  declare -a missing_keys=()
  num_cases=0
  while read -r key case_name; do
    num_cases=$((num_cases + 1))
    if [[ -f "$SHARED/models/quant-llama/quant-llama-$key.gguf" ]]; then
      QUANT_CASES+=("$case_name")
    else
      missing_keys+=("$key")
    fi
  done < <(sed -n 's/^GB_TEST(\([a-z0-9_]*\)) *{ *check_file("\([^"]*\)".*/\2 \1/p' \
    "$ROOT/tests/kernels/cuda/test_cuda_quant_llama.cpp")
  if ((${#missing_keys[@]})); then
    NOT_RUN+=("test_cuda_quant_llama for ${missing_keys[*]}: their files are not in the carried data (tools/device-data.txt)")
  fi
  ((num_cases)) || record quant_llama_carried "failed(no cases)" 0 \
    "no GB_TEST(...) { check_file(\"KEY\" ... } line found in test_cuda_quant_llama.cpp: update tools/device-check.sh"
fi

run_stage ctest_cuda 120 ctest --test-dir "$BUILD" -L cuda "${CTEST_EXCLUDE[@]}" --no-tests=error \
  --output-on-failure --output-junit "$OUT/ctest-cuda.xml"
# Count what ran: a skipped test or an empty run is a failure here.
if [[ "${STAGE_NAMES[-1]}" == ctest_cuda && "${STAGE_STATUS[-1]}" != skipped ]]; then
  if [[ ! -s "$OUT/ctest-cuda.xml" ]]; then
    fail_stage ctest_cuda "failed(no report)" "ctest wrote no JUnit report"
  else
    tests="$(grep -o -m 1 'tests="[0-9]*"' "$OUT/ctest-cuda.xml" | tr -dc '0-9')"
    skipped_names="$(grep -o '<testcase name="[^"]*"[^>]*status="\(notrun\|disabled\)"' "$OUT/ctest-cuda.xml" |
      sed 's/<testcase name="\([^"]*\)".*/\1/' | tr '\n' ' ')"
    if ((${tests:-0} == 0)); then
      fail_stage ctest_cuda "failed(no tests)" "no CUDA test ran"
    elif [[ -n "$skipped_names" ]]; then
      fail_stage ctest_cuda "failed(skipped)" "skipped, not run: ${skipped_names% }"
    else
      log "ctest_cuda: $tests tests ran, none skipped"
    fi
  fi
fi
if ((${#QUANT_CASES[@]})); then
  # As under ctest (tests/glassbox_tests.cmake): the engine's invariant sweep on.
  # shellcheck disable=SC2016  # expanded by the inner bash
  GLASSBOX_CHECK_INVARIANTS=1 run_stage quant_llama_carried 120 bash -c 'rc=0; for c in "${@:2}"; do "$1" test_cuda_quant_llama "cases:$c" || rc=1; done; exit $rc' \
    _ "$CUDA_TESTS" "${QUANT_CASES[@]}"
fi

# --- 4. compute-sanitizer: memcheck, initcheck, racecheck ------------------------
SANITIZER="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
sanitize() {  # sanitize TOOL LIMIT_S NAME TEST [cases:CASE]
  local tool="$1" limit="$2" name="$3"
  shift 3
  local -a opts=(--tool "$tool" --error-exitcode 9)
  [[ "$tool" == memcheck ]] && opts+=(--leak-check full)
  STAGE_QUIET=1
  run_stage "${tool}_$name" "$limit" "$SANITIZER" "${opts[@]}" "$CUDA_TESTS" "$@"
  STAGE_QUIET=0
}
BACKEND_CASE=cases:chunked_prefill_equals_one_shot_and_scrambled_equals_contiguous
if wants sanitizers; then
  if [[ -x "$SANITIZER" ]]; then
    for tool in memcheck initcheck; do
      limit=60
      [[ "$tool" == initcheck ]] && limit=45
      sanitize "$tool" "$limit" kernels test_cuda_kernels
      sanitize "$tool" "$limit" quant test_cuda_quant
      sanitize "$tool" "$limit" attention test_cuda_attention
      sanitize "$tool" "$limit" backend test_cuda_backend "$BACKEND_CASE"
    done
    # Shared-memory hazards: the kernels that share memory within a block
    # (attention, RMSNorm and the logit summaries, the quantized GEMV).
    sanitize racecheck 60 kernels test_cuda_kernels
    sanitize racecheck 60 quant test_cuda_quant
    sanitize racecheck 60 attention test_cuda_attention
  else
    log "compute-sanitizer not found"
    record sanitizers "failed(missing)" 0 "compute-sanitizer not found"
  fi
fi

# --- 5. quantized weights on the device: quant-llama files, then tinyllama Q4_K_M -----
CLI="$BUILD/app/glassbox-cli"
MODEL="$WORK/tinyllama-1.1b-f16.gguf"
QMODEL="$WORK/tinyllama-1.1b-q4_k_m.gguf"
bench_cli() {  # bench_cli NAME MODEL PROMPT_TOKENS
  run_stage "bench_$1" 60 "$CLI" bench -m "$2" --device cuda --prompt-tokens "$3" --gen-tokens 64 \
    --repeats 2 --skip-bandwidth --json --out "$WORK/bench/$1.json"
}
if wants bench; then
  for q in Q4_K_M Q8_0; do
    bench_cli "quant-llama-$q" "$SHARED/models/quant-llama/quant-llama-$q.gguf" 512
  done
  # --- 6. synthetic tinyllama-1.1b F16 and benchmarks -----------------------------
  if [[ -f "$MODEL" ]] || run_stage synth 90 "$CLI" synth --shape tinyllama-1.1b --dtype f16 --out "$MODEL"; then
    if [[ -f "$QMODEL" ]] || run_stage quantize_q4_k_m 120 "$CLI" quantize "$MODEL" "$QMODEL" Q4_K_M; then
      bench_cli quant-tinyllama-q4_k_m-p512 "$QMODEL" 512
    fi
    run_stage bench_cuda 150 bash -c "'$BUILD/tests/kernels/cuda/glassbox_cuda_bench' '$MODEL' --batches 1,8,32,64 \
      --prompts 512,2048 --steps 32 --peak-gb-s 4300 > '$WORK/bench/cuda-bench.json'"
    for p in 512 2048; do
      bench_cli "cli-p$p" "$MODEL" "$p"
    done
  fi
fi
[[ "$OVERALL" == ok ]]
