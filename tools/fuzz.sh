#!/usr/bin/env bash
# Runs the libFuzzer harnesses of tests/fuzz (docs/testing.md).
#   tools/fuzz.sh NAME SECONDS          one harness for SECONDS (nice -n 19); new
#                                       inputs go to build/fuzz-work/NAME/corpus,
#                                       crashes to build/fuzz-work/NAME/artifacts
#   tools/fuzz.sh --regression NAME RUNS the committed corpus and the shared seeds,
#                                       then RUNS fresh mutations (fixed seed);
#                                       what CTest runs (label fuzz)
#   tools/fuzz.sh --explore SECONDS [NAME ...]
#                                       every harness (or those named) for
#                                       SECONDS each, two at a time, then merges
#                                       what each found into its committed
#                                       corpus, minimised (libFuzzer -merge=1:
#                                       only inputs that add coverage); CI runs
#                                       it for 120 s a harness (tools/sanitize.sh)
#   tools/fuzz.sh --list                the harness names
# Options: --build DIR (default build/fuzz, the `fuzz` preset's folder; built
# here if the harness is missing). Shared data: ../shared or $GLASSBOX_SHARED_DIR.
#
# Seeds: tests/fuzz/corpus/NAME (small hand-made files, committed) plus a seed
# folder rebuilt from ../shared at every run (the first MAX_LEN bytes of each
# file; never copied into the repository).
# Memory: libFuzzer's -malloc_limit_mb caps every single allocation and
# -rss_limit_mb the process; the harnesses themselves assert that a load's heap
# peak stays under 32 x the file size + 16 MiB (tests/fuzz/fuzz_support.h).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
shared="${GLASSBOX_SHARED_DIR:-$root/../shared}"
build="$root/build/fuzz"
mode=long

# NAME | max input bytes | dictionary | seeds: globs under ../shared (or @repo/ paths)
# Inputs are kept small (64 KiB for the binary formats): headers, metadata and
# tensor infos all fit, whole tiny models come from the committed seeds, and a
# small input runs many times faster under ASan. Shared files are cut to it.
harness_table() {
  cat <<'EOF'
gguf                65536 gguf.dict models/*/*.gguf testdata/tokenizer/*.gguf testdata/quant/*.gguf
gguf_model          65536 gguf.dict models/stories260K/*.gguf models/llama-2-tiny-random/*.gguf testdata/quant/Q4_0.gguf
gguf_vocab          65536 gguf.dict testdata/tokenizer/*.gguf models/stories260K/stories260K.gguf
llama2c             65536 -         models/stories260K/*.bin
tokenizer_bin       65536 -         models/stories260K/tok512.bin models/llama2-tokenizer/tokenizer.bin
spm_model           65536 -         models/stories260K/tok512.model models/llama2-tokenizer/tokenizer.model models/llama3-tokenizer/tokenizer.model
tokenize             4096 -         testdata/tokenizer/*.inp
sampler_settings     4096 json.dict
workload             8192 json.dict
trace_jsonl         65536 json.dict @repo/tests/data/trace/*.jsonl
session             65536 json.dict
chat_template       16384 -         testdata/chat-templates/templates/*.jinja
openai_request       8192 json.dict
remote_response      8192 json.dict
http_request        32768 -
repo_tree            8192 json.dict
catalog             16384 json.dict @repo/resources/models/catalog.json
json_schema          8192 json.dict testdata/json-schema-suite/*.json
regex                 512 -
gbnf                 8192 -
EOF
}

usage() { sed -n '2,18p' "${BASH_SOURCE[0]}" >&2; exit 2; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --regression) mode=regression; shift ;;
    --explore-one) mode=explore; shift ;;
    --explore)
      shift
      [[ $# -ge 1 ]] || usage
      seconds="$1"; shift
      names=("$@")
      [[ ${#names[@]} -gt 0 ]] || mapfile -t names < <(harness_table | awk '{print $1}')
      # Built first, one at a time (the harnesses share the build).
      for n in "${names[@]}"; do
        [[ -x "$build/tests/fuzz/fuzz_$n" ]] || cmake --build "$build" -j2 --target "fuzz_$n"
      done
      printf '%s\n' "${names[@]}" |
        xargs -P 2 -I{} "${BASH_SOURCE[0]}" --build "$build" --explore-one {} "$seconds"
      exit $? ;;
    --build) build="$(cd "$2" && pwd)"; shift 2 ;;
    --list) harness_table | awk '{print $1}'; exit 0 ;;
    -h|--help) usage ;;
    *) break ;;
  esac
done
[[ $# -eq 2 ]] || usage
name="$1" amount="$2"
row="$(harness_table | awk -v n="$name" '$1 == n')"
[[ -n "$row" ]] || { echo "fuzz.sh: no harness '$name' (tools/fuzz.sh --list)" >&2; exit 2; }
read -r _ max_len dict seeds <<<"$row"

bin="$build/tests/fuzz/fuzz_$name"
if [[ ! -x "$bin" ]]; then
  if [[ ! -f "$build/CMakeCache.txt" ]]; then
    cmake --preset fuzz -DGLASSBOX_SHARED_DIR="$shared" >/dev/null
  fi
  cmake --build "$build" -j2 --target "fuzz_$name"
fi

work="$build/fuzz-work/$name"
mkdir -p "$work/corpus" "$work/artifacts"
rm -rf "$work/seeds" && mkdir -p "$work/seeds"
read -ra patterns <<<"$seeds"  # split without globbing: the globs are under ../shared
shopt -s nullglob
for pattern in "${patterns[@]}"; do
  if [[ "$pattern" == @repo/* ]]; then files=("$root"/${pattern#@repo/}); else files=("$shared"/$pattern); fi
  for f in "${files[@]}"; do
    rel="${f#"$shared"/}"; rel="${rel#"$root"/}"
    head -c "$max_len" "$f" >"$work/seeds/${rel//\//_}"
  done
done

# One allocation may not exceed what a whole input could justify; the process
# stays under 2 GiB.
malloc_mb=$(( max_len * 32 / 1048576 + 64 ))
flags=(-max_len="$max_len" -malloc_limit_mb="$malloc_mb" -rss_limit_mb=2048 -timeout=30
       -artifact_prefix="$work/artifacts/" -print_final_stats=1)
[[ "$dict" != "-" ]] && flags+=(-dict="$root/tests/fuzz/$dict")
committed="$root/tests/fuzz/corpus/$name"
mkdir -p "$committed"
export GLASSBOX_SHARED_DIR="$shared"

if [[ "$mode" == regression ]]; then
  # Fresh inputs go to a scratch folder: the committed corpus stays as it is.
  scratch="$(mktemp -d)"
  trap 'rm -rf "$scratch"' EXIT
  num_inputs=$(find "$committed" "$work/seeds" -type f | wc -l)
  exec "$bin" "${flags[@]}" -seed=1 -runs=$(( num_inputs + amount )) "$scratch" "$committed" "$work/seeds"
fi
if [[ "$mode" == explore ]]; then
  # Explore from the committed corpus and the seeds, then keep (minimised) what
  # adds coverage. A crash stops here with its artifact, as in a long run.
  echo "fuzz.sh: exploring $name for $amount s" >&2
  "$bin" "${flags[@]}" -seed=$RANDOM -max_total_time="$amount" "$work/corpus" "$committed" "$work/seeds" \
    >"$work/explore.log" 2>&1 || { tail -40 "$work/explore.log" >&2; echo "fuzz.sh: $name: a finding, see $work/artifacts" >&2; exit 1; }
  before=$(find "$committed" -type f | wc -l)
  "$bin" "${flags[@]}" -merge=1 -use_counters=0 "$committed" "$work/corpus" >"$work/merge.log" 2>&1 || { tail -20 "$work/merge.log" >&2; exit 1; }
  after=$(find "$committed" -type f | wc -l)
  echo "fuzz.sh: $name: $(grep -o 'cov: [0-9]*' "$work/explore.log" | tail -1), corpus $before -> $after files ($committed)" >&2
  exit 0
fi
# GLASSBOX_FUZZ_KEEP_GOING=1: libFuzzer's fork mode, which records a crash and
# carries on (for long unattended runs; fix every artifact afterwards).
if [[ "${GLASSBOX_FUZZ_KEEP_GOING:-0}" == 1 ]]; then
  flags+=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
fi
echo "fuzz.sh: $name for $amount s (corpus $work/corpus, crashes in $work/artifacts)" >&2
exec nice -n 19 "$bin" "${flags[@]}" -max_total_time="$amount" "$work/corpus" "$committed" "$work/seeds"
