#!/usr/bin/env bash
# tools/device-check.sh: the one script run on the lent GPU machine (H200, CUDA 13,
# CMake, Ninja, Python; no Qt, no sentencepiece, no network). Run it from the
# repository root with $OUT set; everything it learns lands in $OUT:
#
#   summary.json          stage -> {status, seconds}; overall status
#   device-check.log      full log of every command
#   nvidia-smi.txt        the machine
#   ctest-cuda.xml        JUnit report of `ctest -L cuda`
#   memcheck-*.txt        compute-sanitizer memcheck of the CUDA test binaries
#   bench-cli-p*.json     glassbox-cli bench --device cuda (batch 1, TTFT, roofline)
#   bench-quant-*.json    the same for quantized weights on the device: the small
#                         quant-llama Q4_K_M / Q8_0 files of the shared data, and
#                         the synthetic tinyllama-1.1b quantized to Q4_K_M by
#                         glassbox-cli quantize
#   cuda-bench.json       glassbox_cuda_bench: decode tok/s at batch 1/8/32/64,
#                         TTFT for 512/2048-token prompts, batch-1 roofline ratio
#
# Budget: about 8 minutes in all. Each stage has a time limit and is skipped
# when the remaining budget cannot hold it; a failed stage does not stop the
# stages that do not depend on it.
#
# sentencepiece, nlohmann-json and CLI11 are required by the build. When the
# machine lacks them, the script uses a prefix carried in .deps/ (headers,
# libsentencepiece, pkg-config and CMake package files), made on a Debian 12
# development machine with:
#     tools/device-check.sh --prepare-deps        # writes .deps/ (about 4 MB)
# and sent along with the run tool's `carry: [".deps"]` (.deps/ is git-ignored).
#
# Other modes, for testing the script without a GPU:
#     tools/device-check.sh --configure-only       # deps + configure, then stop
#     GLASSBOX_DEVICE_CHECK_FORCE_DEPS=1            # use .deps/ even if the system has the packages
# Other knobs: GLASSBOX_DEVICE_CHECK_BUILD (build dir, default build/gpu),
# GLASSBOX_DEVICE_CHECK_BUDGET_S (default 480), GLASSBOX_CUDA_ARCH (default 90).
set -uo pipefail

ROOT="$(pwd)"
if [[ ! -f "$ROOT/CMakeLists.txt" || ! -d "$ROOT/kernels/cuda" ]]; then
  echo "device-check: run from the repository root" >&2
  exit 2
fi

prepare_deps() {
  local dest="$ROOT/.deps" multiarch
  multiarch="$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)"
  rm -rf "$dest"
  mkdir -p "$dest/include" "$dest/lib/pkgconfig" "$dest/share/cmake"
  cp -a /usr/include/sentencepiece_processor.h /usr/include/sentencepiece_trainer.h "$dest/include/"
  cp -a /usr/include/nlohmann "$dest/include/"
  cp -a /usr/include/CLI "$dest/include/"
  cp -a /usr/lib/"$multiarch"/libsentencepiece*.so* "$dest/lib/"
  cp -a /usr/share/cmake/nlohmann_json /usr/share/cmake/CLI11 "$dest/share/cmake/"
  # A relocatable .pc: pkg-config resolves ${pcfiledir} to wherever .deps/ lands.
  cat > "$dest/lib/pkgconfig/sentencepiece.pc" <<'PC'
prefix=${pcfiledir}/../..
libdir=${prefix}/lib
includedir=${prefix}/include

Name: sentencepiece
Description: SentencePiece (carried prefix for the device check)
Version: 0.1.97
Libs: -L${libdir} -lsentencepiece -lsentencepiece_train
Cflags: -I${includedir}
PC
  du -sh "$dest"
  echo "device-check: wrote $dest; carry it with the run (carry: [\".deps\"])"
}

if [[ "${1:-}" == "--prepare-deps" ]]; then
  prepare_deps
  exit $?
fi
CONFIGURE_ONLY=0
[[ "${1:-}" == "--configure-only" ]] && CONFIGURE_ONLY=1

OUT="${OUT:-$ROOT/build/device-check-out}"
mkdir -p "$OUT"
LOG="$OUT/device-check.log"
: > "$LOG"
BUILD="${GLASSBOX_DEVICE_CHECK_BUILD:-$ROOT/build/gpu}"
WORK="${GLASSBOX_DEVICE_CHECK_WORK:-$BUILD/device-check}"
BUDGET_S="${GLASSBOX_DEVICE_CHECK_BUDGET_S:-480}"
START_S=$SECONDS
JOBS="$(nproc 2>/dev/null || echo 4)"
export PATH="/usr/local/cuda/bin:$PATH"

declare -a STAGE_NAMES=() STAGE_STATUS=() STAGE_SECONDS=()
OVERALL=ok

log() { echo "[device-check +$((SECONDS - START_S))s] $*" | tee -a "$LOG" >&2; }
remaining() { echo $((BUDGET_S - (SECONDS - START_S))); }

# run_stage NAME LIMIT_S CMD...: runs CMD with a time limit (capped by the budget).
run_stage() {
  local name="$1" limit="$2"
  shift 2
  local left
  left="$(remaining)"
  if ((left < 20)); then
    log "stage $name: skipped, budget spent"
    record "$name" skipped 0
    return 1
  fi
  ((limit > left)) && limit=$left
  log "stage $name (limit ${limit}s): $*"
  local t0=$SECONDS rc
  timeout --kill-after=10 "$limit" "$@" >> "$LOG" 2>&1
  rc=$?
  local status=ok
  if ((rc == 124 || rc == 137)); then status=timeout; elif ((rc != 0)); then status="failed($rc)"; fi
  log "stage $name: $status in $((SECONDS - t0))s"
  record "$name" "$status" $((SECONDS - t0))
  [[ "$status" == ok ]]
}

record() {
  STAGE_NAMES+=("$1")
  STAGE_STATUS+=("$2")
  STAGE_SECONDS+=("$3")
  [[ "$2" == ok ]] || OVERALL=failed
}

write_summary() {
  {
    echo "{"
    echo "  \"overall\": \"$OVERALL\","
    echo "  \"seconds\": $((SECONDS - START_S)),"
    echo "  \"commit\": \"$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)\","
    echo "  \"stages\": ["
    local i n=${#STAGE_NAMES[@]}
    for ((i = 0; i < n; ++i)); do
      local comma=","
      ((i == n - 1)) && comma=""
      echo "    {\"name\": \"${STAGE_NAMES[i]}\", \"status\": \"${STAGE_STATUS[i]}\", \"seconds\": ${STAGE_SECONDS[i]}}$comma"
    done
    echo "  ]"
    echo "}"
  } > "$OUT/summary.json"
  log "summary: $OUT/summary.json (overall $OVERALL)"
}
trap write_summary EXIT

# --- 0. the machine ----------------------------------------------------------
if command -v nvidia-smi > /dev/null; then
  nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
else
  echo "nvidia-smi not found" > "$OUT/nvidia-smi.txt"
fi
nvcc --version >> "$LOG" 2>&1 || log "nvcc not found on PATH"

# --- 1. dependencies: system packages, else the carried .deps/ prefix ------------
CMAKE_EXTRA=()
if [[ -z "${GLASSBOX_DEVICE_CHECK_FORCE_DEPS:-}" ]] && pkg-config --exists sentencepiece 2> /dev/null &&
   [[ -d /usr/include/nlohmann && -d /usr/include/CLI ]]; then
  log "dependencies: system packages"
  record deps ok 0
elif [[ -f "$ROOT/.deps/lib/pkgconfig/sentencepiece.pc" ]]; then
  log "dependencies: carried prefix $ROOT/.deps"
  export PKG_CONFIG_PATH="$ROOT/.deps/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export LD_LIBRARY_PATH="$ROOT/.deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  CMAKE_EXTRA+=("-DCMAKE_PREFIX_PATH=$ROOT/.deps")
  record deps ok 0
else
  log "dependencies: sentencepiece not installed and no .deps/ carried; run tools/device-check.sh --prepare-deps on the development machine and carry .deps"
  record deps failed 0
  exit 1
fi

# Shared test data (models/, testdata/): $GLASSBOX_SHARED_DIR, else shared/ in the
# tree (how the run tool ships it), else ../shared (the development layout).
SHARED="${GLASSBOX_SHARED_DIR:-}"
if [[ -z "$SHARED" ]]; then
  if [[ -d "$ROOT/shared/models" ]]; then SHARED="$ROOT/shared"; else SHARED="$ROOT/../shared"; fi
fi
export GLASSBOX_SHARED_DIR="$SHARED"
[[ -d "$SHARED/models/stories260K" ]] || log "warning: no stories260K under $SHARED; the golden tests will fail"

# --- 2. configure and build (headless, CUDA forced on, Release) -------------------
run_stage configure 90 cmake -S "$ROOT" -B "$BUILD" -G Ninja -DGLASSBOX_UI=OFF -DGLASSBOX_CUDA=ON \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${GLASSBOX_CUDA_ARCH:-90}" -DGLASSBOX_SHARED_DIR="$SHARED" "${CMAKE_EXTRA[@]}" || exit 1
((CONFIGURE_ONLY)) && exit 0
# Every CUDA test is in one executable (tests/glassbox_tests.cmake); its first
# argument names the test.
TARGETS=(glassbox-cli glassbox_cuda_bench glassbox_tests_kernels_cuda)
run_stage build 240 ninja -C "$BUILD" -j "$JOBS" "${TARGETS[@]}" || exit 1

# --- 3. tests ------------------------------------------------------------------
# A GPU machine: a CUDA test that finds no usable device fails, never skips.
export GLASSBOX_REQUIRE_GPU=1
run_stage ctest_cuda 120 ctest --test-dir "$BUILD" -L cuda --output-on-failure --output-junit "$OUT/ctest-cuda.xml"

# --- 4. compute-sanitizer memcheck ----------------------------------------------
SANITIZER="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
TESTS_DIR="$BUILD/tests/kernels/cuda"
CUDA_TESTS="$TESTS_DIR/glassbox_tests_kernels_cuda"
memcheck() {  # memcheck NAME TEST [cases:CASE]
  local name="$1"
  shift
  run_stage "memcheck_$name" 90 bash -c "'$SANITIZER' --tool memcheck --leak-check full --error-exitcode 9 $* > '$OUT/memcheck-$name.txt' 2>&1"
}
if [[ -x "$SANITIZER" ]]; then
  memcheck kernels "$CUDA_TESTS" test_cuda_kernels
  memcheck quant "$CUDA_TESTS" test_cuda_quant
  memcheck attention "$CUDA_TESTS" test_cuda_attention
  memcheck backend "$CUDA_TESTS" test_cuda_backend cases:chunked_prefill_equals_one_shot_and_scrambled_equals_contiguous
else
  log "compute-sanitizer not found"
  record memcheck "failed(missing)" 0
fi

# --- 5. quantized weights on the device: quant-llama files, then tinyllama Q4_K_M -----
CLI="$BUILD/app/glassbox-cli"
MODEL="$WORK/tinyllama-1.1b-f16.gguf"
QMODEL="$WORK/tinyllama-1.1b-q4_k_m.gguf"
mkdir -p "$WORK"
bench_cli() {  # bench_cli NAME MODEL PROMPT_TOKENS
  run_stage "bench_$1" 60 "$CLI" bench -m "$2" --device cuda --prompt-tokens "$3" --gen-tokens 64 \
    --repeats 2 --skip-bandwidth --json --out "$OUT/bench-$1.json"
}
for q in Q4_K_M Q8_0; do
  bench_cli "quant-llama-$q" "$SHARED/models/quant-llama/quant-llama-$q.gguf" 512
done
# --- 6. synthetic tinyllama-1.1b F16 and benchmarks -------------------------------
if [[ -f "$MODEL" ]] || run_stage synth 90 "$CLI" synth --shape tinyllama-1.1b --dtype f16 --out "$MODEL"; then
  if [[ -f "$QMODEL" ]] || run_stage quantize_q4_k_m 120 "$CLI" quantize "$MODEL" "$QMODEL" Q4_K_M; then
    bench_cli quant-tinyllama-q4_k_m-p512 "$QMODEL" 512
  fi
  run_stage bench_cuda 150 bash -c "'$BUILD/tests/kernels/cuda/glassbox_cuda_bench' '$MODEL' --batches 1,8,32,64 \
    --prompts 512,2048 --steps 32 --peak-gb-s 4300 > '$OUT/cuda-bench.json'"
  for p in 512 2048; do
    run_stage "bench_cli_p$p" 60 "$CLI" bench -m "$MODEL" --device cuda --prompt-tokens "$p" --gen-tokens 64 \
      --repeats 2 --skip-bandwidth --json --out "$OUT/bench-cli-p$p.json"
  done
fi
[[ "$OVERALL" == ok ]]
