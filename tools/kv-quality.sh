#!/usr/bin/env bash
# What each KV type costs on a real text: `score` teacher-forces the text with
# K/V stored in each type (and K/V combinations) against the same model with
# F32 K/V (--base, --base-kv-type-k/-v f32), and prints a markdown row per type:
# mean and p99 KL per token, top-1 agreement and the perplexity change.
#   tools/kv-quality.sh CLI MODEL TOKENS [TYPES...]
#     CLI     build/.../app/glassbox-cli
#     MODEL   a GGUF or llama2.c file (e.g. Gemma 3 270M from ../shared/tools/fixtures/get-gemma3-270m.sh)
#     TOKENS  roughly how many tokens of text (the GPL-3 licence text, repeated when longer; Debian's base-files),
#             at GLASSBOX_CHARS_PER_TOKEN characters a token (default 4; stories260K's 512-piece vocabulary: 1.4)
#     TYPES   "k/v" pairs (default: f16/f16 bf16/bf16 q8_0/q8_0 q8_0/q4_0 q4_0/q4_0 q4_1/q4_1 iq4_nl/iq4_nl f16/q4_0)
# Threads: GLASSBOX_THREADS (default all). Prints the table on stdout, progress on stderr.
set -euo pipefail
cli="$1"; model="$2"; tokens="$3"; shift 3
types=("$@")
[[ ${#types[@]} -gt 0 ]] || types=(f16/f16 bf16/bf16 q8_0/q8_0 q8_0/q4_0 q4_0/q4_0 q4_1/q4_1 iq4_nl/iq4_nl f16/q4_0)
text=$(mktemp); trap 'rm -f "$text" "$text.json"' EXIT
src=/usr/share/common-licenses/GPL-3
# About 4 characters a token; the scorer refuses a text longer than the context.
chars=$(python3 -c "print(int($tokens * float('${GLASSBOX_CHARS_PER_TOKEN:-4}')))")
while [[ $(wc -c <"$text") -lt $chars ]]; do cat "$src" >>"$text"; done
truncate -s "$chars" "$text"
threads=(); [[ -n "${GLASSBOX_THREADS:-}" ]] && threads=(--threads "$GLASSBOX_THREADS")
base_ppl=""
echo "| K/V | tokens | mean KL | p99 KL | top-1 agree | perplexity | vs F32 |"
echo "|---|---|---|---|---|---|---|"
for kv in f32/f32 "${types[@]}"; do
  k=${kv%/*}; v=${kv#*/}
  echo "kv-quality: $kv" >&2
  "$cli" score --model "$model" --base "$model" "${threads[@]}" --kv-type-k "$k" --kv-type-v "$v" \
    --text "$text" --top 1 --json >"$text.json"
  python3 - "$text.json" "$kv" "$base_ppl" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); kv = sys.argv[2]; base = sys.argv[3]
ppl = j["perplexity"]; n = len(j["tokens"])
delta = "" if not base else f"{100.0 * (ppl / float(base) - 1.0):+.3f}%"
print(f"| {kv} | {n} | {j['kl_mean']:.2e} | {j['kl_percentiles']['p99']:.2e} | {100.0 * j['top1_agreement']:.2f}% | {ppl:.4f} | {delta} |")
PY
  [[ -n "$base_ppl" ]] || base_ppl=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['perplexity'])" "$text.json")
done
