#!/usr/bin/env bash
# Decode time under KV eviction (docs/kv-eviction.md), through the whole engine
# (`glassbox-cli generate --json`: the scheduler, the eviction bookkeeping, the
# sampler): a prompt of about DEPTH tokens of text, then GEN greedy tokens; the
# summary's tpot_ms is the mean time per decoded token.
#   - the curve: full vs each policy at budget B, at each depth;
#   - the bookkeeping: h2o and sink with a budget equal to the depth (they evict
#     one token per decode step and attend as many slots as full does) against
#     full at that depth.
#   tools/kv-eviction-bench.sh CLI MODEL [--depths "1024 2048 4096 8192"] [--budget 512] [--gen 64] [--repeats 3]
# Prints markdown tables on stdout. Text: the GPL-3 (Debian's base-files), repeated.
set -euo pipefail
[[ $# -ge 2 ]] || { sed -n 2,11p "${BASH_SOURCE[0]}"; exit 2; }
cli="$1" model="$2"; shift 2
depths="1024 2048 4096 8192" budget=512 gen=64 repeats=3
while [[ $# -gt 0 ]]; do
  case "$1" in
    --depths) depths="$2"; shift 2 ;;
    --budget) budget="$2"; shift 2 ;;
    --gen) gen="$2"; shift 2 ;;
    --repeats) repeats="$2"; shift 2 ;;
    *) echo "kv-eviction-bench: unknown option $1" >&2; exit 2 ;;
  esac
done
text=$(mktemp); trap 'rm -f "$text"' EXIT
while [[ $(wc -c <"$text") -lt 200000 ]]; do cat /usr/share/common-licenses/GPL-3 >>"$text"; done
# The median tpot_ms of `repeats` runs (text cut to about depth tokens at 4 characters a token).
tpot() {
  local depth=$1; shift
  local prompt; prompt=$(head -c $((depth * 4)) "$text")
  for _ in $(seq "$repeats"); do
    "$cli" generate --model "$model" -p "$prompt" -n "$gen" --ignore-eos --no-echo --json "$@" | tail -1 |
      python3 -c "import json,sys; print(json.load(sys.stdin)['tpot_ms'])"
  done | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
echo "Decode ms per token (median of $repeats), $gen tokens after the prompt:"
echo
echo "| depth | full | sink B=$budget | h2o B=$budget | snapkv B=$budget |"
echo "|---|---|---|---|---|"
for d in $depths; do
  f=$(tpot "$d"); s=$(tpot "$d" --kv-policy sink --kv-budget "$budget")
  h=$(tpot "$d" --kv-policy h2o --kv-budget "$budget"); k=$(tpot "$d" --kv-policy snapkv --kv-budget "$budget")
  echo "| $d | $f | $s | $h | $k |"
done
echo
echo "Bookkeeping: a budget equal to the prompt attends as many slots as full, and evicts every step:"
echo
echo "| depth | full | sink B=prompt | h2o B=prompt | h2o overhead |"
echo "|---|---|---|---|---|"
for d in $depths; do
  # The budget is the prompt's length: every decode step evicts one token and
  # attends that many slots (full attends them plus the answer so far).
  n=$("$cli" generate --model "$model" -p "$(head -c $((d * 4)) "$text")" -n 1 --no-echo --json | tail -1 |
      python3 -c "import json,sys; print(json.load(sys.stdin)['num_prompt_tokens'])")
  f=$(tpot "$d"); s=$(tpot "$d" --kv-policy sink --kv-budget "$n"); h=$(tpot "$d" --kv-policy h2o --kv-budget "$n")
  echo "| $d | $f | $s | $h | $(python3 -c "print(f'{100.0 * ($h / $f - 1.0):+.1f}%')") |"
done
