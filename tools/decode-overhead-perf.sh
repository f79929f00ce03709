#!/usr/bin/env bash
# Where a decode step's time goes, by perf: samples in the matmul kernels (the
# weights streaming), in attention, and everywhere else (norms, RoPE, SwiGLU,
# residuals, KV writes, logits, the engine's bookkeeping, the thread pool), as
# milliseconds per token. "Everywhere else" is the per-token overhead the
# weights do not explain; it also holds the process's start and model load, so
# it overstates the overhead a little (more --gen-tokens, less of that).
# A complement to tools/overhead-regression.sh, whose layer-count fit mixes in
# the last-level cache when a shape's layers fit there (stories15M: 4 MB a layer,
# 32 MB of L3 on the Zen 5 machines).
#
#   tools/decode-overhead-perf.sh [--shape stories15M] [--dtype f32] [--threads 1]
#                                 [--gen-tokens 256] [--glassbox PATH]
# Needs `perf` (Debian: linux-perf) and permission to record (perf_event_paranoid <= 2, or root).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
shape=stories15M dtype=f32 threads=1 gen=256 gb="$root/build/release/app/glassbox-cli"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --shape) shape="$2"; shift 2 ;;
    --dtype) dtype="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --gen-tokens) gen="$2"; shift 2 ;;
    --glassbox) gb="$2"; shift 2 ;;
    *) echo "decode-overhead-perf: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -x "$gb" ]] || { echo "decode-overhead-perf: no glassbox-cli at $gb" >&2; exit 2; }
command -v perf > /dev/null || { echo "decode-overhead-perf: no perf (apt install linux-perf)" >&2; exit 2; }
work="${TMPDIR:-/tmp}/glassbox-overhead"; mkdir -p "$work"
f="$work/$shape-$dtype.gguf"
[[ -f "$f" ]] || "$gb" synth --shape "$shape" --dtype "$dtype" --out "$f" >&2
json="$work/decode-bench.json"
perf record -q -o "$work/decode.perf" -- "$gb" bench --model "$f" --threads "$threads" --prompt-tokens 1 \
  --gen-tokens "$gen" --repeats 3 --skip-bandwidth --json > "$json" 2> /dev/null
perf report -q -i "$work/decode.perf" --no-children --sort symbol 2> /dev/null |
  python3 -c '
import json, re, sys
bench = json.load(open(sys.argv[1]))
ms = bench["decode_ms_per_token"]
groups = {"matmul": 0.0, "attention": 0.0, "other": 0.0}
other = []
for line in sys.stdin:
    m = re.match(r"\s*([\d.]+)%\s+\[.\]\s+(.*?)\s*$", line)
    if not m:
        continue
    pct, sym = float(m.group(1)), m.group(2)
    if re.search(r"matmul|gemv|tiled_gemm|decode_transposed|vec_dot", sym):
        groups["matmul"] += pct
    elif re.search(r"attention|score_pass|softmax_pass|value_pass", sym):
        groups["attention"] += pct
    else:
        groups["other"] += pct
        other.append((pct, sym[:90]))
total = sum(groups.values())
print("%s, %d threads: %.3f ms/token (%.1f tok/s), %d tokens x 3 runs" %
      (bench["model"], bench["threads"], ms, bench["decode_tok_s"], int(sys.argv[2])))
for k, v in groups.items():
    print("  %-9s %5.1f%% of samples = %.4f ms/token" % (k, 100 * v / total, ms * v / total))
print("  largest in other:")
for pct, sym in sorted(other, reverse=True)[:8]:
    print("    %5.2f%%  %s" % (100 * pct / total, sym))
' "$json" "$gen"
