#!/usr/bin/env python3
"""Grammar-constrained decoding side by side: Glassbox and llama.cpp's llama-server
on the same GGUF and machine, interleaved, each with and without a JSON Schema.

Usage: tools/grammar_compare.py GLASSBOX_CLI LLAMA_SERVER MODEL.gguf SCHEMA.json [SCHEMA.json ...]
Env: SEEDS (default 1,2,3,4), N (tokens without a schema, default 64), THREADS
(default: nproc), ROUNDS (default 2).

What is compared: the mean time per generated token (decode step: forward pass
plus sampling) with a schema and without, and the difference, which is what
the grammar costs per token. Glassbox: `generate --json` per-token forward_ms
and sample_ms (sample_ms includes the grammar mask), a fresh process per run,
so every run pays its format's first-use costs (trie, frame walks): the
pessimistic one-off case. llama.cpp: `/completion` with `json_schema`,
timings.predicted_per_token_ms, one server process (llama.cpp keeps no grammar
caches between requests). The first generated token is left out on both sides.
Prints one JSON line per run, then a summary per engine and schema.
"""
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def glassbox_run(cli, model, prompt, seed, n, threads, schema_path):
    cmd = [cli, "generate", "--model", model, "--prompt", prompt, "--temperature", "1", "--seed", str(seed),
           "-n", str(n), "--threads", str(threads), "--json"]
    if schema_path:
        cmd += ["--json-schema", schema_path]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True).stdout
    toks = [json.loads(x) for x in out.splitlines() if x.strip()]
    toks = [t for t in toks if "forward_ms" in t and "done" not in t][1:]
    if not toks:
        return None
    fwd = statistics.mean(t["forward_ms"] for t in toks)
    smp = statistics.mean(t["sample_ms"] for t in toks)
    return {"tokens": len(toks), "forward_ms": fwd, "sample_ms": smp, "step_ms": fwd + smp}


def llama_run(url, prompt, seed, n, schema):
    body = {"prompt": prompt, "n_predict": n, "temperature": 1.0, "seed": seed, "cache_prompt": False,
            "top_k": 40, "top_p": 0.95, "min_p": 0.05}
    if schema is not None:
        body["json_schema"] = schema
    req = urllib.request.Request(url + "/completion", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        j = json.loads(r.read())
    t = j["timings"]
    return {"tokens": t["predicted_n"], "step_ms": t["predicted_per_token_ms"], "text": j["content"][:80]}


def main():
    if len(sys.argv) < 5:
        raise SystemExit(__doc__)
    cli, server, model = sys.argv[1:4]
    schemas = sys.argv[4:]
    seeds = [int(s) for s in os.environ.get("SEEDS", "1,2,3,4").split(",")]
    n = int(os.environ.get("N", "64"))
    threads = int(os.environ.get("THREADS", str(os.cpu_count())))
    rounds = int(os.environ.get("ROUNDS", "2"))
    port = free_port()
    proc = subprocess.Popen([server, "-m", model, "--port", str(port), "-t", str(threads), "-c", "4096", "-np", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = "http://127.0.0.1:%d" % port
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(url + "/health", timeout=2)
                break
            except Exception:
                time.sleep(0.2)
        results = []
        for rnd in range(rounds):
            for path in [None] + schemas:
                schema = json.load(open(path)) if path else None
                name = os.path.basename(path) if path else "(none)"
                prompt = "A record as JSON:" if path else "Once upon a time"
                for seed in seeds:
                    g = glassbox_run(cli, model, prompt, seed, n if not path else 300, threads, path)
                    l = llama_run(url, prompt, seed, n if not path else 300, schema)
                    for engine, r in (("glassbox", g), ("llama.cpp", l)):
                        if r is None:
                            continue
                        r.update({"engine": engine, "schema": name, "seed": seed, "round": rnd})
                        results.append(r)
                        print(json.dumps(r), flush=True)
        print("\nengine     schema           runs  ms/token  grammar ms/token (vs none)", file=sys.stderr)
        for engine in ("glassbox", "llama.cpp"):
            base = [r["step_ms"] for r in results if r["engine"] == engine and r["schema"] == "(none)"]
            base_ms = statistics.mean(base) if base else float("nan")
            for name in ["(none)"] + [os.path.basename(p) for p in schemas]:
                rs = [r["step_ms"] for r in results if r["engine"] == engine and r["schema"] == name]
                if not rs:
                    continue
                m = statistics.mean(rs)
                print("%-10s %-16s %4d  %8.2f  %+.2f (%+.1f%%)" % (engine, name, len(rs), m, m - base_ms,
                                                                  100 * (m - base_ms) / base_ms), file=sys.stderr)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    main()
