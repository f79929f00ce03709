#!/usr/bin/env bash
# Serving side by side: glassbox-cli serve and llama.cpp's llama-server on the
# same GGUF and machine, one at a time, interleaved (G L G L ...), each started
# fresh, measured by tools/load_test.py --sweep (streaming completions with the
# same prompt text for both: no chat template differences). Prints one JSON
# line per run to stdout; progress to stderr. docs/performance.md, "HTTP
# serving".
#   tools/serve_compare.sh GLASSBOX_CLI LLAMA_SERVER MODEL.gguf [ROUNDS] [SWEEP]
# Env: SLOTS (sequences at once on both; default 16), THREADS (default: nproc),
# CTX (KV tokens in all; default 16384), REQUESTS (per sweep point, default 48),
# EXTRA (load_test --extra JSON; default llama-server's sampler defaults made explicit).
set -euo pipefail
cli="$1" llama="$2" model="$3" rounds="${4:-2}" sweep="${5:-1,4,16}"
slots="${SLOTS:-16}" threads="${THREADS:-$(nproc)}" ctx="${CTX:-16384}" requests="${REQUESTS:-48}"
extra="${EXTRA:-{\"top_k\": 40, \"top_p\": 0.95, \"min_p\": 0.05}}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
port=$((20000 + RANDOM % 20000))

wait_ready() {
  for _ in $(seq 600); do
    curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  return 1
}

run_one() {
  local name="$1"; shift
  "$@" >/tmp/serve_compare_server.log 2>&1 &
  local pid=$!
  if ! wait_ready; then kill "$pid" 2>/dev/null; echo "serve_compare: $name did not start" >&2; cat /tmp/serve_compare_server.log >&2; return 1; fi
  echo "serve_compare: $name: sweep $sweep" >&2
  python3 "$here/load_test.py" --url "http://127.0.0.1:$port" --endpoint completions --sweep "$sweep" \
    --requests "$requests" --duration-s 600 --extra "$extra" |
    python3 -c "import json,sys; print(json.dumps({'server': '$name', 'runs': json.load(sys.stdin)}))"
  kill "$pid"; wait "$pid" 2>/dev/null || true
}

for round in $(seq "$rounds"); do
  # The same KV room: CTX tokens in all (blocks of 16), CTX / SLOTS per request.
  run_one glassbox "$cli" serve --model "$model" --port "$port" --threads "$threads" --max-seqs "$slots" \
    --ctx $((ctx / slots)) --kv-blocks $((ctx / 16))
  run_one llama-server "$llama" -m "$model" --port "$port" --threads "$threads" --threads-batch "$threads" \
    -np "$slots" -cb -c "$ctx" -ctk f16 -ctv f16
done
