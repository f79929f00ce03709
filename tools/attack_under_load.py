#!/usr/bin/env python3
"""The attack suite and the load test together (issue #42): nothing is lost.

Starts `glassbox-cli serve` on a free loopback port, runs tools/load_test.py's
clients against it and, at the same time, attack threads: 400 MiB chunked
bodies, 10,000-field headers, 1 MiB header lines, clients sending a byte at a
time, 200 idle connections, DNS-rebinding Hosts, cross-origin POSTs and
malformed JSON, round after round until the load is done. Then it checks that
nothing was lost: every load request was answered (no errors), every attack
got its refusal or a closed connection (never a 2xx, never a 5xx), /health
answered throughout, and the server ends with no request running and an empty
KV pool (/metrics). Prints one JSON object; exit status 1 on any loss.

  tools/attack_under_load.py --cli build/test/app/glassbox-cli \\
      --model-path ../shared/models/stories260K/stories260K.bin [--clients 32 --requests 256]

Standard library only; tooling, not a test (it takes minutes).
"""
import argparse
import json
import os
import socket
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import load_test  # noqa: E402


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=15)
    return s


def status_of(data):
    if not data.startswith(b"HTTP/1.1 "):
        return None
    return int(data[9:12])


def request_status(port, payload, slow=False):
    """Sends payload (bytes or a generator of bytes), returns the answer's status or None (closed)."""
    s = connect(port)
    try:
        try:
            for part in ([payload] if isinstance(payload, bytes) else payload):
                s.sendall(part)
                if slow:
                    time.sleep(0.25)
        except OSError:
            pass  # the server stopped reading: fine, read its answer
        try:
            return status_of(s.recv(64))
        except OSError:
            return None
    finally:
        s.close()


def attacks(port):
    body_ok = json.dumps({"prompt": "Once", "max_tokens": 2}).encode()

    def big_chunked():
        yield b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
        piece = b" " * 65536
        for _ in range(6400):  # 400 MiB
            yield b"10000\r\n" + piece + b"\r\n"

    many = b"GET /v1/models HTTP/1.1\r\nHost: localhost\r\n" + b"".join(b"X-F%d: x\r\n" % i for i in range(10000)) + b"\r\n"
    long_line = b"GET /v1/models HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"x" * (1 << 20) + b"\r\n\r\n"
    slow = [bytes([c]) for c in b"GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n"]
    rebinding = (b"POST /v1/completions HTTP/1.1\r\nHost: evil.example\r\nContent-Length: %d\r\n\r\n" % len(body_ok)) + body_ok
    origin = (b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nOrigin: http://evil.example\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body_ok)) + body_ok
    malformed = [b"{", b"[]", b"null", b'{"prompt": 1e999}', b'{"prompt": "x", "n": "two"}', b"[" * 100000]
    cases = [("chunked_400MiB", big_chunked(), {413, None}, False),
             ("10000_headers", many, {431, None}, False),
             ("1MiB_header_line", long_line, {431, None}, False),
             ("byte_a_second", iter(slow), {None}, True),
             ("dns_rebinding", rebinding, {403}, False),
             ("cross_origin", origin, {403}, False)]
    for i, m in enumerate(malformed):
        req = (b"POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n\r\n" % len(m)) + m
        cases.append(("malformed_json_%d" % i, req, {400}, False))
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--model-path", required=True)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--requests", type=int, default=256)
    ap.add_argument("--serve-arg", action="append", default=[])
    a = ap.parse_args()
    proc, url = load_test.start_server(a.cli, a.model_path, ["--header-timeout-ms", "2000", "--idle-timeout-ms", "2000",
                                                             *a.serve_arg])
    port = int(url.rsplit(":", 1)[1])
    unexpected, counts, health = [], {}, {"ok": 0, "failed": 0, "slowest_ms": 0.0}
    done = threading.Event()
    try:
        def health_probe():
            while not done.is_set():
                t0 = time.perf_counter()
                st = request_status(port, b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                health["ok" if st == 200 else "failed"] += 1
                health["slowest_ms"] = max(health["slowest_ms"], (time.perf_counter() - t0) * 1000)
                time.sleep(0.2)

        def attacker():
            idle = []
            while not done.is_set():
                idle = [connect(port) for _ in range(200)]  # left idle while the round runs
                for name, payload, allowed, slow in attacks(port):
                    if done.is_set():
                        break
                    st = request_status(port, payload, slow)
                    counts[name] = counts.get(name, 0) + 1
                    if st not in allowed:
                        unexpected.append({"attack": name, "status": st})
                for s in idle:
                    s.close()

        threads = [threading.Thread(target=health_probe), threading.Thread(target=attacker)]
        for t in threads:
            t.start()
        la = argparse.Namespace(requests=a.requests, duration_s=600.0, seed=0, rate=0.0, model="", api_key="",
                                endpoint="completions")
        with urllib.request.urlopen(url + "/v1/models", timeout=30) as r:
            la.model = json.loads(r.read())["data"][0]["id"]
        parsed = load_test.urllib.parse.urlparse(url)
        load = load_test.measure(url, parsed, la, {}, a.clients)
        done.set()
        for t in threads:
            t.join()
        # The pool drains (bounded wait: the last cancelled attack connections close).
        metrics = {}
        for _ in range(100):
            metrics = load_test.scrape(url)
            if metrics.get("glassbox_num_requests_running") == 0 and metrics.get("glassbox_kv_cache_usage_perc") == 0:
                break
            time.sleep(0.1)
    finally:
        done.set()
        proc.terminate()
        proc.wait(timeout=60)
    result = {
        "load": {k: load[k] for k in ("requests", "ok", "empty_completions", "errors", "output_tokens_per_s")},
        "attacks_sent": counts, "unexpected_answers": unexpected, "health": health,
        "after": {"requests_running": metrics.get("glassbox_num_requests_running"),
                  "kv_cache_usage": metrics.get("glassbox_kv_cache_usage_perc")},
    }
    lost = (load["errors"] or unexpected or health["failed"] or load["ok"] + load["empty_completions"] != a.requests or
            metrics.get("glassbox_num_requests_running") != 0 or metrics.get("glassbox_kv_cache_usage_perc") != 0)
    result["nothing_lost"] = not lost
    print(json.dumps(result, indent=2))
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
