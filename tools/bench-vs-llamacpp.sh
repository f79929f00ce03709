#!/usr/bin/env bash
# Side-by-side CPU speed of Glassbox and llama.cpp on the same GGUF files, in one
# run on one machine, interleaved (llama.cpp, Glassbox, llama.cpp, Glassbox, ...)
# so that a busy moment of the machine hits both engines alike.
#
#   tools/bench-vs-llamacpp.sh LLAMA_CPP_BUILD_DIR [options]
#     --files "a.gguf b.gguf"   models to compare (default: synthesized, see --shapes)
#     --shapes "stories110M"    synthetic shapes to make with `glassbox-cli synth`
#     --dtypes "f32 f16"        weight types of the synthesized files
#     --threads "1 2"           thread counts
#     --rounds N                interleaved rounds per file and thread count (default 2)
#     --glassbox PATH           glassbox-cli (default: build/release/app/glassbox-cli)
#     --glassbox-args "ARGS"    extra arguments of the glassbox bench calls (e.g. --bf16-matmuls);
#                               given more than once, Glassbox runs once per set after each
#                               llama.cpp run ("" for the defaults), each with its own ratio
#     --out FILE.jsonl          every measurement as one JSON line (default: bench-vs-llamacpp.jsonl)
#     --decode-only             tg128 only (no pp512): decode rows in a third of the time
#
# llama.cpp is built outside this repository, CPU-only, e.g.
#   cmake -B build -DGGML_NATIVE=ON -DGGML_CUDA=OFF -DLLAMA_CURL=OFF && cmake --build build --target llama-bench
# Both engines are measured the way llama-bench defines its tests: pp512 is a
# 512-token prompt processed at once from an empty cache, tg128 is 128 tokens
# decoded one at a time from (almost) empty cache. Ratios are Glassbox / llama.cpp
# in tokens per second (medians over the rounds). llama.cpp keeps its default F16
# KV cache, and so does Glassbox (its default since #37; --glassbox-args "-ctk f32 -ctv f32"
# measures the exact float32 cache).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[[ $# -ge 1 ]] || { sed -n 2,21p "${BASH_SOURCE[0]}"; exit 2; }
llama_dir="$1"; shift
llama_bench="$llama_dir/bin/llama-bench"
[[ -x "$llama_bench" ]] || { echo "bench-vs-llamacpp: no llama-bench at $llama_bench" >&2; exit 2; }

files="" shapes="stories110M" dtypes="f32 f16" threads="1 2" rounds=2
gb="$root/build/release/app/glassbox-cli" out="bench-vs-llamacpp.jsonl" variants=() decode_only=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --files) files="$2"; shift 2 ;;
    --shapes) shapes="$2"; shift 2 ;;
    --dtypes) dtypes="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --glassbox) gb="$2"; shift 2 ;;
    --glassbox-args) variants+=("$2"); shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --decode-only) decode_only=1; shift ;;
    *) echo "bench-vs-llamacpp: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ ${#variants[@]} -gt 0 ]] || variants=("")
[[ -x "$gb" ]] || { echo "bench-vs-llamacpp: no glassbox-cli at $gb (build it or pass --glassbox)" >&2; exit 2; }

if [[ -z "$files" ]]; then
  work="${TMPDIR:-/tmp}/glassbox-bench-models"; mkdir -p "$work"
  for s in $shapes; do
    for d in $dtypes; do
      f="$work/$s-$d.gguf"
      [[ -f "$f" ]] || "$gb" synth --shape "$s" --dtype "$d" --out "$f" >&2
      files="$files $f"
    done
  done
fi

: > "$out"
# The processor: its name and family/model/stepping (the kernels' tuning is per
# family, issue #44), so tables from different families are never mixed.
cpu_field() { grep -m1 "^$1[[:space:]]*:" /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'; }
echo "machine: $(cpu_field 'model name'), $(cpu_field vendor_id) family $(cpu_field 'cpu family') model $(cpu_field model) stepping $(cpu_field stepping), $(nproc) cores" >&2
# The machine's FMA peak and read bandwidth (the denominators of bench's
# prefill_fraction_of_fma_peak and roofline_ratio), measured before the runs.
"$gb" probe >&2
for f in $files; do
  for t in $threads; do
    for r in $(seq 1 "$rounds"); do
      # llama.cpp: pp512 and tg128 in one call, 3 repetitions each (tg128 only with --decode-only).
      "$llama_bench" -m "$f" -p "$([[ $decode_only -eq 1 ]] && echo 0 || echo 512)" -n 128 -t "$t" -r 3 -o jsonl 2>/dev/null |
        python3 -c '
import json, sys
for line in sys.stdin:
    j = json.loads(line)
    test = "pp%d" % j["n_prompt"] if j["n_gen"] == 0 else "tg%d" % j["n_gen"]
    print(json.dumps({"engine": "llama.cpp", "file": sys.argv[1], "threads": int(sys.argv[2]),
                      "round": int(sys.argv[3]), "test": test, "tok_s": j["avg_ts"]}))' "$f" "$t" "$r" >> "$out"
      # Glassbox: the same two tests, once per set of arguments.
      for gb_args in "${variants[@]}"; do
        engine="glassbox${gb_args:+ $gb_args}"
        # shellcheck disable=SC2086  # the arguments split as on a command line
        [[ $decode_only -eq 1 ]] || "$gb" bench --model "$f" --threads "$t" --prompt-tokens 512 --gen-tokens 1 --repeats 3 --skip-bandwidth --json $gb_args |
          python3 -c '
import json, sys
j = json.load(sys.stdin)
print(json.dumps({"engine": sys.argv[4], "file": sys.argv[1], "threads": int(sys.argv[2]),
                  "round": int(sys.argv[3]), "test": "pp512", "tok_s": j["prefill_tok_s"]}))' "$f" "$t" "$r" "$engine" >> "$out"
        # shellcheck disable=SC2086
        "$gb" bench --model "$f" --threads "$t" --prompt-tokens 1 --gen-tokens 128 --repeats 3 --skip-bandwidth --json $gb_args |
          python3 -c '
import json, sys
j = json.load(sys.stdin)
print(json.dumps({"engine": sys.argv[4], "file": sys.argv[1], "threads": int(sys.argv[2]),
                  "round": int(sys.argv[3]), "test": "tg128", "tok_s": j["decode_tok_s"]}))' "$f" "$t" "$r" "$engine" >> "$out"
      done
      echo "done: $(basename "$f") t=$t round $r" >&2
    done
  done
done

python3 - "$out" <<'EOF'
import json, os, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
groups, engines = {}, []
for r in rows:
    groups.setdefault((r["file"], r["threads"], r["test"]), {}).setdefault(r["engine"], []).append(r["tok_s"])
    if r["engine"] != "llama.cpp" and r["engine"] not in engines:
        engines.append(r["engine"])
print("| file | threads | test | llama.cpp tok/s |" + "".join(f" {e} tok/s | ratio |" for e in engines))
print("|---" * (4 + 2 * len(engines)) + "|")
for (f, t, test), e in sorted(groups.items()):
    l = statistics.median(e.get("llama.cpp", [0]))
    cells = ""
    for name in engines:
        g = statistics.median(e.get(name, [0]))
        cells += f" {g:.1f} | {g / l if l > 0 else float('nan'):.2f} |"
    print(f"| {os.path.basename(f)} | {t} | {test} | {l:.1f} |{cells}")
EOF
