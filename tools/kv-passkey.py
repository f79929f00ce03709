#!/usr/bin/env python3
"""Pass-key retrieval under KV eviction (docs/kv-eviction.md).

A random 5-digit pass key is stated once at a given depth of filler text
(the filler of the Landmark Attention / LongLoRA pass-key test), and the model
is asked for it at the end; greedy decoding of 8 tokens retrieves it when the
key appears in them. Each (length, depth) is run with the full cache and with
every policy and budget, through `glassbox-cli generate --kv-policy`.

  tools/kv-passkey.py CLI MODEL [--lengths 2048,8192,16384] [--depths 0.1,0.5,0.9]
                      [--budgets 256,512,1024,2048] [--policies sink,h2o,snapkv]
                      [--chars-per-token 4.0] [--out results.jsonl] [--seed 1]

Prints a markdown table (retrieved / runs per policy, budget and length) on
stdout; every run is also one JSON line in --out, written as it finishes (a
long sweep can be stopped and its lines kept).
"""
import argparse
import json
import random
import subprocess
import sys
import time

FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "
HEAD = ("There is important info hidden inside a lot of irrelevant text. Find it and memorize it. "
        "I will quiz you about the important information there.\n\n")
QUESTION = "\n\nWhat is the pass key? The pass key is"


def prompt(num_chars, depth, key):
    body = (FILLER * (num_chars // len(FILLER) + 1))[:num_chars]
    cut = body.rfind(". ", 0, max(2, int(len(body) * depth))) + 2
    needle = f"The pass key is {key}. Remember it. {key} is the pass key. "
    return HEAD + body[:cut] + needle + body[cut:] + QUESTION


def run(cli, model, text, policy, budget):
    args = [cli, "generate", "--model", model, "-p", text, "-n", "8", "--no-echo", "--json"]
    if policy != "full":
        args += ["--kv-policy", policy, "--kv-budget", str(budget)]
    t0 = time.time()
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(args[:4])} ... failed: {p.stderr.strip()[-400:]}")
    done = json.loads(p.stdout.strip().splitlines()[-1])
    return done, time.time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cli")
    ap.add_argument("model")
    ap.add_argument("--lengths", default="2048,8192,16384")
    ap.add_argument("--depths", default="0.1,0.5,0.9")
    ap.add_argument("--budgets", default="256,512,1024,2048")
    ap.add_argument("--policies", default="sink,h2o,snapkv")
    ap.add_argument("--chars-per-token", type=float, default=4.0)
    ap.add_argument("--out", default="")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    lengths = [int(x) for x in a.lengths.split(",")]
    depths = [float(x) for x in a.depths.split(",")]
    budgets = [int(x) for x in a.budgets.split(",")]
    policies = a.policies.split(",")
    out = open(a.out, "a") if a.out else None
    results = {}  # (policy, budget, length) -> [hits, runs]
    for length in lengths:
        for depth in depths:
            key = rng.randint(10000, 99999)
            text = prompt(int(length * a.chars_per_token), depth, key)
            for policy, budget in [("full", 0)] + [(p, b) for p in policies for b in budgets]:
                done, secs = run(a.cli, a.model, text, policy, budget)
                hit = str(key) in done["text"]
                row = {"length": length, "depth": depth, "key": key, "policy": policy, "budget": budget,
                       "prompt_tokens": done["num_prompt_tokens"], "answer": done["text"], "retrieved": hit,
                       "seconds": round(secs, 2)}
                print(json.dumps(row), file=sys.stderr, flush=True)
                if out:
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                r = results.setdefault((policy, budget, length), [0, 0])
                r[0] += hit
                r[1] += 1
    print("| policy | budget | " + " | ".join(f"{n} tokens" for n in lengths) + " |")
    print("|---|---|" + "---|" * len(lengths))
    for policy, budget in [("full", 0)] + [(p, b) for p in policies for b in budgets]:
        cells = []
        for n in lengths:
            h, t = results.get((policy, budget, n), [0, 0])
            cells.append(f"{h}/{t}")
        print(f"| {policy} | {budget if budget else '-'} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
