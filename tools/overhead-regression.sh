#!/usr/bin/env bash
# Per-token fixed overhead of decode: the step time that streaming the weights
# does not explain. Synthesizes one shape at several layer counts
# (`glassbox-cli synth --layers`), decodes each with `bench` (from an empty
# cache), fits ms/token = a + b * layers, and subtracts what the weights cost at
# the machine's measured read bandwidth (`glassbox-cli probe`):
#   per-layer overhead = b - layer_bytes / bandwidth
#   fixed overhead     = a - (bytes outside the layers) / bandwidth
#
#   tools/overhead-regression.sh [--shape stories15M] [--dtype f32] [--layers "1 2 4 8 12"]
#                                [--threads 1] [--glassbox PATH]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
shape=stories15M dtype=f32 layers="1 2 4 8 12" threads=1 gb="$root/build/release/app/glassbox-cli"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --shape) shape="$2"; shift 2 ;;
    --dtype) dtype="$2"; shift 2 ;;
    --layers) layers="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --glassbox) gb="$2"; shift 2 ;;
    *) echo "overhead-regression: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -x "$gb" ]] || { echo "overhead-regression: no glassbox-cli at $gb" >&2; exit 2; }
work="${TMPDIR:-/tmp}/glassbox-overhead"; mkdir -p "$work"
results="$work/results.jsonl"; : > "$results"
probe="$("$gb" probe --threads "$threads" --json)"
for n in $layers; do
  f="$work/$shape-$dtype-L$n.gguf"
  [[ -f "$f" ]] || "$gb" synth --shape "$shape" --dtype "$dtype" --layers "$n" --out "$f" >&2
  "$gb" bench --model "$f" --threads "$threads" --prompt-tokens 1 --gen-tokens 256 --repeats 5 --skip-bandwidth --json |
    python3 -c 'import json,sys; j=json.load(sys.stdin); print(json.dumps({"layers": int(sys.argv[1]), "ms": j["decode_ms_per_token"], "bytes": j["weight_bytes_per_token"]}))' "$n" >> "$results"
done
python3 - "$results" "$probe" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
probe = json.loads(sys.argv[2])
bw = probe["read_bandwidth_gb_s"] * 1e9
n = len(rows)
xs = [r["layers"] for r in rows]; ys = [r["ms"] for r in rows]; bs = [r["bytes"] for r in rows]
mx, my = sum(xs) / n, sum(ys) / n
b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
a = my - b * mx
mb = sum(bs) / n
bb = sum((x - mx) * (v - mb) for x, v in zip(xs, bs)) / sum((x - mx) ** 2 for x in xs)
ab = mb - bb * mx
for r in rows:
    print("layers %3d: %.3f ms/token, %.1f MB of weights" % (r["layers"], r["ms"], r["bytes"] / 1e6))
print("fit: %.4f ms + %.4f ms per layer; weights %.2f MB + %.2f MB per layer; read bandwidth %.2f GB/s (%s)"
      % (a, b, ab / 1e6, bb / 1e6, bw / 1e9, probe["processor"]))
print("per-layer overhead %.4f ms, fixed overhead %.4f ms per token (time not explained by streaming weights)"
      % (b - bb / bw * 1e3, a - ab / bw * 1e3))
PY
