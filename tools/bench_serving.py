#!/usr/bin/env python3
"""Serving benchmarks for the paged KV cache and the continuous-batching scheduler.

Runs `glassbox-cli serve-bench` on generated workloads and prints one JSON object:
  throughput   -- tokens/s at 1, 4, 16 and 64 concurrent requests
  prefix       -- TTFT of a request sharing a 1,024-token prefix with a finished one,
                  against the same request cold (prefix cache off)
  capacity     -- peak sequences the paged pool holds on a mixed-length workload,
                  against contiguous max-context slabs of the same bytes
  waste        -- empty KV slots per sequence (internal fragmentation)

Usage: tools/bench_serving.py --cli build/release/app/glassbox-cli --model M.gguf [--out FILE.json]
Tooling only: Glassbox never needs Python at run time.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile


def serve(cli, model, lines, extra, threads):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
        path = f.name
    try:
        cmd = [cli, "serve-bench", "--model", model, "--workload", path, "--json",
               "--threads", str(threads)] + extra
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        return json.loads(out)
    finally:
        os.unlink(path)


def prompt(rng, n, vocab):
    return [1] + [rng.randrange(3, vocab) for _ in range(n - 1)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--ctx", type=int, default=2048)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out")
    a = ap.parse_args()
    rng = random.Random(1)
    ctx = ["--ctx", str(a.ctx)]
    result = {"model": a.model, "threads": a.threads}

    # Throughput against concurrency: N requests arrive together, 32-token prompts, 64 new tokens.
    result["throughput"] = {}
    for n in (1, 4, 16, 64):
        lines = [{"prompt_ids": prompt(rng, 32, a.vocab), "max_tokens": 64, "ignore_eos": True} for _ in range(n)]
        s = serve(a.cli, a.model, lines, ctx + ["--max-seqs", str(n), "--max-batch-tokens", "2048"], a.threads)["summary"]
        result["throughput"][str(n)] = {"tok_s": s["throughput_tok_s"], "tpot_ms_p50": s["tpot_ms_p50"]}
        print(f"concurrency {n}: {s['throughput_tok_s']:.1f} tok/s", file=sys.stderr)
    base = result["throughput"]["1"]["tok_s"]
    for n in ("4", "16", "64"):
        result["throughput"][n]["speedup_vs_1"] = result["throughput"][n]["tok_s"] / base

    # Shared 1,024-token prefix: the second request arrives after the first finished.
    prefix = prompt(rng, 1024, a.vocab)
    first = {"prompt_ids": prefix + prompt(rng, 9, a.vocab)[1:], "max_tokens": 1}
    second = {"prompt_ids": prefix + prompt(rng, 9, a.vocab)[1:], "max_tokens": 1, "arrival_ms": 4000}
    warm = serve(a.cli, a.model, [first, second], ctx, a.threads)["requests"][1]
    cold = serve(a.cli, a.model, [dict(second, arrival_ms=0)], ctx + ["--no-prefix-cache"], a.threads)["requests"][0]
    result["prefix"] = {"ttft_ms_hit": warm["ttft_ms"], "ttft_ms_cold": cold["ttft_ms"],
                        "cached_tokens": warm["num_cached_tokens"], "speedup": cold["ttft_ms"] / warm["ttft_ms"]}
    print(f"prefix: hit {warm['ttft_ms']:.1f} ms vs cold {cold['ttft_ms']:.1f} ms", file=sys.stderr)

    # Capacity: a pool worth 8 max-context sequences, 64 requests of mixed lengths.
    lines = []
    for _ in range(64):
        lines.append({"prompt_ids": prompt(rng, rng.randrange(16, 400), a.vocab),
                      "max_tokens": rng.randrange(16, 200), "ignore_eos": True})
    blocks = 8 * a.ctx // 16
    s = serve(a.cli, a.model, lines, ctx + ["--kv-blocks", str(blocks), "--max-seqs", "64",
                                            "--max-batch-tokens", "1024"], a.threads)["summary"]
    result["capacity"] = {"pool_blocks": blocks, "max_running_seqs": s["max_running_seqs"],
                          "contiguous_equivalent_seqs": s["contiguous_equivalent_seqs"],
                          "ratio": s["max_running_seqs"] / max(1, s["contiguous_equivalent_seqs"]),
                          "preemptions": s["preemptions"]}
    result["waste"] = {"slots_per_seq_max": s["kv_waste_slots_per_seq_max"],
                       "slots_per_seq_mean": s["kv_waste_slots_per_seq_mean"], "block_size": 16}
    text = json.dumps(result, indent=2)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
