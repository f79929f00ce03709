#!/usr/bin/env python3
"""Load test for an OpenAI-compatible server on this machine (loopback only).

N concurrent streaming clients (default 64) send chat completions that share one
system prompt and differ in the user turn, its length (0, 2, 6 or 14 extra
sentences before the question) and max_tokens (16 to 128), until --requests are
done or --duration-s has passed. Arrivals are closed-loop (each client sends
its next request when its last one ends) or, with --rate R, a Poisson process
of R requests/s (exponential gaps; at most --clients in flight, later arrivals
wait for a free client, and their waiting counts in their TTFT). --sweep 1,4,16,64
runs one measurement per client count and prints them as a list. Reports one JSON object:
requests/s, output tokens/s, client-side TTFT and TPOT percentiles, errors by
kind, and -- when the server exposes Prometheus /metrics (Glassbox, vLLM) --
the prefix-cache hit rate over the run. A client-side prefix hit rate comes from
each answer's usage: prompt_tokens_details.cached_tokens (Glassbox, vLLM) or,
for llama-server, prompt tokens minus its timings.prompt_n (tokens it had to
evaluate; the rest came from the slot's cached prompt).

Either point it at a running server:
  tools/load_test.py --url http://127.0.0.1:8080 [--model NAME]
or let it start `glassbox-cli serve` on a free port and stop it afterwards:
  tools/load_test.py --cli build/dev/app/glassbox-cli --model-path ../shared/models/stories260K/stories260K.bin

Only the Python standard library; tooling only (Glassbox never needs Python).
"""
import argparse
import http.client
import json
import random
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

SYSTEM = ("Lily had a big dog named Max. Max liked to run in the park and play with the ball. "
          "One day, Lily and Max went to the park together. The sun was warm and the birds sang. ")
USER_TURNS = ["Tell me what happened next.", "What did Max find?", "Who did they meet?", "Where did the ball go?",
              "Why was Lily sad?", "What did Mom say?", "How did the day end?", "What did Max eat?"]
MAX_TOKENS = [16, 32, 64, 128]
EXTRA_SENTENCES = [0, 2, 6, 14]
FILLER = ["The grass was green and soft.", "A little bird sat on the fence.", "Mom made a cake for the picnic.",
          "The river was cold and clear.", "Tim had a red kite with a long tail.", "The cat slept in the sun.",
          "They found a shiny stone near the tree.", "The wind blew the leaves around."]
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def percentile(values, p):
    if not values:
        return 0.0
    v = sorted(values)
    pos = p / 100.0 * (len(v) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def scrape(url):
    try:
        with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
            text = r.read().decode()
    except Exception:
        return {}
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            try:
                out[name] = float(value)
            except ValueError:
                pass
    return out


def prefix_counters(m):
    """(queries, hits) in tokens from Glassbox's or vLLM's counter names, or None."""
    for q, h in (("glassbox_prefix_cache_queries_total", "glassbox_prefix_cache_hits_total"),
                 ("vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total")):
        qs = [v for k, v in m.items() if k.split("{")[0] == q]
        hs = [v for k, v in m.items() if k.split("{")[0] == h]
        if qs and hs:
            return sum(qs), sum(hs)
    return None


def one_request(host, port, model, rng, key, extra, t_arrival=None, endpoint="chat"):
    user = " ".join(rng.choice(FILLER) for _ in range(rng.choice(EXTRA_SENTENCES)))
    user = (user + " " + rng.choice(USER_TURNS)).strip()
    body = {"model": model, "stream": True, "max_tokens": rng.choice(MAX_TOKENS), "temperature": 0.8,
            "seed": rng.randrange(1 << 31), "ignore_eos": True, "stream_options": {"include_usage": True}}
    if endpoint == "chat":
        path = "/v1/chat/completions"
        body["messages"] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
    else:  # the same text without a chat template: both servers see the same prompt
        path = "/v1/completions"
        body["prompt"] = SYSTEM + user
    body.update(extra)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    conn = http.client.HTTPConnection(host, port, timeout=300)
    t0 = t_arrival if t_arrival is not None else time.perf_counter()
    try:
        conn.request("POST", path, json.dumps(body), headers)
        resp = conn.getresponse()
        if resp.status != 200:
            resp.read()
            return {"error": "http_%d" % resp.status}
        first = last = None
        tokens = 0
        finish = None
        prompt_tokens = cached = None
        while True:
            line = resp.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data: "):
                continue
            data = line[6:]
            if data == b"[DONE]":
                break
            chunk = json.loads(data)
            if "error" in chunk:
                return {"error": "stream_error"}
            usage = chunk.get("usage") or {}
            if usage.get("prompt_tokens"):
                prompt_tokens = usage["prompt_tokens"]
                details = usage.get("prompt_tokens_details") or {}
                if details.get("cached_tokens") is not None:
                    cached = details["cached_tokens"]
                elif (chunk.get("timings") or {}).get("prompt_n") is not None:  # llama-server
                    cached = max(0, prompt_tokens - chunk["timings"]["prompt_n"])
            for choice in chunk.get("choices", []):
                finish = choice.get("finish_reason") or finish
                if (choice.get("delta") or {}).get("content") or choice.get("text"):
                    now = time.perf_counter()
                    first = first or now
                    last = now
                    tokens += 1
        if first is None:  # a legitimate empty answer (e.g. the model's first token ends it)
            return {"empty": True, "finish": finish} if finish else {"error": "no_tokens"}
        return {"ttft": first - t0, "tpot": (last - first) / (tokens - 1) if tokens > 1 else None, "tokens": tokens,
                "prompt_tokens": prompt_tokens, "cached_tokens": cached}
    except Exception as e:  # connection refused/reset, timeout
        return {"error": type(e).__name__}
    finally:
        conn.close()


def start_server(cli, model_path, extra):
    proc = subprocess.Popen([cli, "serve", "--model", model_path, "--port", "0", *extra], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if "http://" not in line:
        proc.kill()
        raise SystemExit("serve did not start: " + line)
    return proc, line[line.index("http://"):].split()[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", help="running server (loopback only)")
    ap.add_argument("--cli", help="glassbox-cli to start a server with")
    ap.add_argument("--model-path", help="model for --cli")
    ap.add_argument("--serve-arg", action="append", default=[], help="extra argument for glassbox-cli serve (repeatable)")
    ap.add_argument("--model", default="", help="model name sent in requests (default: the server's first model)")
    ap.add_argument("--api-key", default="")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--requests", type=int, default=512, help="stop after this many requests")
    ap.add_argument("--duration-s", type=float, default=120.0, help="stop starting requests after this long")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--endpoint", choices=["chat", "completions"], default="chat",
                    help="chat completions (each server's chat template) or completions (the same prompt text for every server)")
    ap.add_argument("--rate", type=float, default=0.0, help="Poisson arrivals, requests/s (0: closed loop)")
    ap.add_argument("--sweep", default="", help="client counts to measure one after another, e.g. 1,4,16,64")
    ap.add_argument("--extra", default="{}",
                    help="JSON object merged into every request body, e.g. the same sampler fields for every server: "
                         "'{\"top_k\": 40, \"top_p\": 0.95, \"min_p\": 0.05}' (servers' defaults differ)")
    a = ap.parse_args()

    extra = json.loads(a.extra)
    if not isinstance(extra, dict):
        raise SystemExit("--extra must be a JSON object")
    proc = None
    if a.cli:
        proc, url = start_server(a.cli, a.model_path, a.serve_arg)
    elif a.url:
        url = a.url.rstrip("/")
    else:
        raise SystemExit("give --url or --cli and --model-path")
    parsed = urllib.parse.urlparse(url)
    if parsed.hostname not in LOOPBACK:
        raise SystemExit("refusing a non-loopback server: " + url)
    try:
        if not a.model:
            req = urllib.request.Request(url + "/v1/models", headers={"Authorization": "Bearer " + a.api_key} if a.api_key else {})
            with urllib.request.urlopen(req, timeout=30) as r:
                a.model = json.loads(r.read())["data"][0]["id"]
        sweep = [int(x) for x in a.sweep.split(",")] if a.sweep else [a.clients]
        summaries = [measure(url, parsed, a, extra, clients) for clients in sweep]
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=60)

    print(json.dumps(summaries if a.sweep else summaries[0], indent=2))
    failed = any(x["errors"] for x in summaries)
    return 1 if failed else 0  # an empty completion is an answer, not an error


def measure(url, parsed, a, extra, clients):
    before = scrape(url)
    results, lock = [], threading.Lock()
    counter = iter(range(a.requests))
    deadline = time.perf_counter() + a.duration_s
    rng_arrivals = random.Random(a.seed)
    arrivals = None
    if a.rate > 0:  # Poisson arrivals, handed to free clients in order
        import queue
        arrivals = queue.Queue()

        def arrive():
            t = time.perf_counter()
            for _ in range(a.requests):
                t += rng_arrivals.expovariate(a.rate)
                if t > deadline:
                    break
                delay = t - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                arrivals.put(t)
            for _ in range(clients):
                arrivals.put(None)
        threading.Thread(target=arrive, daemon=True).start()

    def client(i):
        rng = random.Random(a.seed * 1000 + i)
        while time.perf_counter() < deadline:
            t_arrival = None
            if arrivals is not None:
                t_arrival = arrivals.get()
                if t_arrival is None:
                    return
            else:
                with lock:
                    if next(counter, None) is None:
                        return
            r = one_request(parsed.hostname, parsed.port, a.model, rng, a.api_key, extra, t_arrival, a.endpoint)
            with lock:
                results.append(r)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    after = scrape(url)

    ok = [r for r in results if "error" not in r and "empty" not in r]
    empty = [r for r in results if "empty" in r]
    answered = len(ok) + len(empty)
    errors = {}
    for r in results:
        if "error" in r:
            errors[r["error"]] = errors.get(r["error"], 0) + 1
    ttft = [r["ttft"] * 1000 for r in ok]
    tpot = [r["tpot"] * 1000 for r in ok if r["tpot"] is not None]
    summary = {
        "url": url, "model": a.model, "extra": extra, "clients": clients, "rate": a.rate or None,
        "requests": len(results), "ok": len(ok), "empty_completions": len(empty),
        "errors": errors, "wall_s": round(wall, 3),
        "requests_per_s": round(answered / wall, 3) if wall > 0 else 0.0,
        "output_tokens_per_s": round(sum(r["tokens"] for r in ok) / wall, 1) if wall > 0 else 0.0,
        "ttft_ms": {p: round(percentile(ttft, q), 2) for p, q in (("p50", 50), ("p90", 90), ("p99", 99))},
        "tpot_ms": {p: round(percentile(tpot, q), 3) for p, q in (("p50", 50), ("p90", 90), ("p99", 99))},
    }
    counted = [r for r in ok if r.get("prompt_tokens") and r.get("cached_tokens") is not None]
    if counted:
        summary["client_prefix_hit_rate"] = round(sum(r["cached_tokens"] for r in counted) /
                                                  sum(r["prompt_tokens"] for r in counted), 4)
    b, c = prefix_counters(before), prefix_counters(after)
    if b and c and c[0] > b[0]:
        summary["prefix_hit_rate"] = round((c[1] - b[1]) / (c[0] - b[0]), 4)
    return summary


if __name__ == "__main__":
    sys.exit(main())
