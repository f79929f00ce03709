#!/usr/bin/env bash
# Decode speed at depth with each KV type, Glassbox and llama.cpp side by side
# in one run on one machine, interleaved (llama.cpp, then Glassbox, for each
# file, depth, KV type and thread count), as the KV-memory issue asks:
#   llama-bench -p 0 -n N -d DEPTH -ctk T -ctv T -fa 1   against
#   glassbox-cli bench --prompt-tokens DEPTH --gen-tokens N -ctk T -ctv T
# (both prefill DEPTH tokens, then time N decoded tokens; llama.cpp needs flash
# attention for a quantized V, so -fa 1 throughout).
#
#   tools/bench-kv-depth.sh LLAMA_BENCH GLASSBOX_CLI --files "a.gguf b.gguf" \
#       [--depths "4096 16384"] [--types "f16 q8_0"] [--threads "1 2"] [--gen 32]
# Prints a markdown table (tok/s and the ratio Glassbox / llama.cpp) and writes
# every measurement to bench-kv-depth.jsonl.
set -euo pipefail
[[ $# -ge 2 ]] || { sed -n 2,14p "${BASH_SOURCE[0]}"; exit 2; }
llama="$1" gb="$2"; shift 2
files="" depths="4096 16384" types="f16 q8_0" threads="1 2" gen=32 out=bench-kv-depth.jsonl
while [[ $# -gt 0 ]]; do
  case "$1" in
    --files) files="$2"; shift 2 ;;
    --depths) depths="$2"; shift 2 ;;
    --types) types="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --gen) gen="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "bench-kv-depth: unknown option $1" >&2; exit 2 ;;
  esac
done
: >"$out"
echo "| file | threads | depth | K/V | llama.cpp tg$gen | Glassbox tg$gen | ratio |"
echo "|---|---|---|---|---|---|---|"
for f in $files; do
  for t in $threads; do
    for d in $depths; do
      for kv in $types; do
        l=$("$llama" -m "$f" -p 0 -n "$gen" -d "$d" -ctk "$kv" -ctv "$kv" -fa 1 -t "$t" -r 1 -o json 2>/dev/null |
          python3 -c "import json,sys; r=json.load(sys.stdin); print(r[-1]['avg_ts'])")
        g=$("$gb" bench --model "$f" --prompt-tokens "$d" --gen-tokens "$gen" --repeats 1 --skip-bandwidth \
          --threads "$t" -ctk "$kv" -ctv "$kv" --json 2>/dev/null |
          python3 -c "import json,sys; print(json.load(sys.stdin)['decode_tok_s'])")
        printf '{"file":"%s","threads":%s,"depth":%s,"kv":"%s","llama_tok_s":%s,"glassbox_tok_s":%s}\n' \
          "$f" "$t" "$d" "$kv" "$l" "$g" >>"$out"
        python3 -c "import sys; l,g=float(sys.argv[1]),float(sys.argv[2]); print(f'| {sys.argv[3]} | {sys.argv[4]} | {sys.argv[5]} | {sys.argv[6]} | {l:.2f} | {g:.2f} | {g/l:.2f} |')" \
          "$l" "$g" "$(basename "$f")" "$t" "$d" "$kv"
      done
    done
  done
done
