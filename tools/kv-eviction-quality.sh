#!/usr/bin/env bash
# What each KV eviction policy costs on a real text (docs/kv-eviction.md):
# `score --kv-policy` teacher-forces the text as a pruned and a full request in
# one batch and reports per-token KL(full || pruned), top-1 agreement and the
# perplexity change. One markdown row per policy and budget.
#   tools/kv-eviction-quality.sh CLI MODEL TOKENS [--budgets "64 128 256"] [--policies "sink h2o snapkv"]
#     TOKENS  about how many tokens of text (the GPL-3 licence text, repeated; Debian's base-files), at
#             GLASSBOX_CHARS_PER_TOKEN characters a token (default 4; stories260K's 512-piece vocabulary: 1.4)
# snapkv is given the first half of the text as its prompt (it prunes a prompt),
# the others the first token. Threads: GLASSBOX_THREADS (default all).
set -euo pipefail
[[ $# -ge 3 ]] || { sed -n 2,10p "${BASH_SOURCE[0]}"; exit 2; }
cli="$1" model="$2" tokens="$3"; shift 3
budgets="64 128 256" policies="sink h2o snapkv"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --budgets) budgets="$2"; shift 2 ;;
    --policies) policies="$2"; shift 2 ;;
    *) echo "kv-eviction-quality: unknown option $1" >&2; exit 2 ;;
  esac
done
text=$(mktemp); trap 'rm -f "$text" "$text.json"' EXIT
chars=$(python3 -c "print(int($tokens * float('${GLASSBOX_CHARS_PER_TOKEN:-4}')))")
while [[ $(wc -c <"$text") -lt $chars ]]; do cat /usr/share/common-licenses/GPL-3 >>"$text"; done
truncate -s "$chars" "$text"
threads=(); [[ -n "${GLASSBOX_THREADS:-}" ]] && threads=(--threads "$GLASSBOX_THREADS")
echo "| policy | budget | scored tokens | mean KL | p99 KL | top-1 agree | perplexity | full cache | change | evicted | seconds |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for p in $policies; do
  for b in $budgets; do
    echo "kv-eviction-quality: $p $b" >&2
    t0=$(date +%s.%N)
    "$cli" score --model "$model" "${threads[@]}" --text "$text" --top 1 --json --kv-policy "$p" --kv-budget "$b" >"$text.json"
    t1=$(date +%s.%N)
    python3 - "$text.json" "$p" "$b" "$t0" "$t1" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); k = j["kv_policy"]
print(f"| {sys.argv[2]} | {sys.argv[3]} | {len(j['tokens'])} | {j['kl_mean']:.2e} | {j['kl_percentiles']['p99']:.2e} | "
      f"{100.0 * j['top1_agreement']:.2f}% | {j['perplexity']:.4f} | {k['perplexity_full']:.4f} | "
      f"{k['perplexity_change_percent']:+.2f}% | {k['evicted_tokens']} | {float(sys.argv[5]) - float(sys.argv[4]):.0f} |")
PY
  done
done
