#!/usr/bin/env python3
"""`glassbox-cli models pull|list|rm` against a local server that mimics the
Hugging Face hub (issue #43): the tree listing with sizes and LFS sha256,
resolve URLs that redirect to a blob store, Range requests, a gated
repository. Each case ends as stated, and nothing half-written is ever left
under a model's final name:

  listing + redirect + sha256      the file arrives, verified, under its name
  cut mid-file, then again         the first run keeps a .part, the second resumes
                                   with a Range request and completes
  wrong sha256                     refused; no file, no part
  404                              "not found"; nothing written
  gated without / with HF_TOKEN    401 names HF_TOKEN; with the token it arrives
  full disk (RLIMIT_FSIZE)         a clear write error; no final file
  huge stated size                 refused before downloading (disk space)
  cancel (SIGINT)                  "cancelled"; the part is kept
  two downloads of one file        the second is refused
  not a GGUF file                  refused after download; removed
  plain https URL                  downloaded (no hash stated)
  list / rm                        the folder as JSON; rm deletes
  catalog                          the shipped catalog, then --update from the
                                   mimic: the user copy; pull ID downloads the
                                   entry (its size as the hub states it, not the
                                   catalog); a bad or missing catalog leaves the
                                   user copy as it was

Usage: models_pull_test.py GLASSBOX_CLI
"""
import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CLI = sys.argv[1]
TOKEN = "secret-token"

rng = __import__("random").Random(7)
GOOD = b"GGUF" + bytes(rng.getrandbits(8) for _ in range(3 * 1024 * 1024))
NOT_GGUF = b"PK\x03\x04" + bytes(rng.getrandbits(8) for _ in range(64 * 1024))
BLOBS = {"good": GOOD, "notgguf": NOT_GGUF}


def sha(b):
    return hashlib.sha256(b).hexdigest()


# repo -> (file, blob key, stated sha256, stated size, behaviour)
REPOS = {
    "acme/good": ("model-Q4_K_M.gguf", "good", sha(GOOD), len(GOOD), ""),
    "acme/cut": ("cut.gguf", "good", sha(GOOD), len(GOOD), "cut"),
    "acme/wrongsha": ("bad.gguf", "good", "0" * 64, len(GOOD), ""),
    "acme/gated": ("gated.gguf", "good", sha(GOOD), len(GOOD), "gated"),
    "acme/slow": ("slow.gguf", "good", sha(GOOD), len(GOOD), "slow"),
    "acme/huge": ("huge.gguf", "good", sha(GOOD), 1 << 50, ""),
    "acme/notgguf": ("weights.gguf", "notgguf", sha(NOT_GGUF), len(NOT_GGUF), ""),
    "acme/catalogued-GGUF": ("catalogued-Q4_K_M.gguf", "good", sha(GOOD), len(GOOD), ""),
}
# The catalog the mimic serves (engine/download/catalog.h). Its size for the
# entry is wrong on purpose: a download checks what the hub lists.
CATALOG = json.dumps({"format_version": 1, "published": "by the test", "models": [
    {"id": "acme-catalogued", "name": "Acme Catalogued", "repo": "acme/catalogued-GGUF",
     "file": "catalogued-Q4_K_M.gguf", "size_bytes": 12345, "weight_type": "Q4_K_M", "architecture": "llama",
     "parameters": 1000, "context_length": 2048, "license": "mit", "description": "Served by the hub mimic.",
     "kv_bytes_per_token": 1024}]}, indent=1).encode()
BAD_CATALOG = json.dumps({"format_version": 99, "models": []}).encode()
ranges_seen = []
cut_done = set()


class Hub(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_body(self, code, body, ctype="application/json", extra=()):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        parts = self.path.split("?")[0].strip("/").split("/")
        if parts[:2] == ["api", "models"] and len(parts) == 6 and parts[4] == "tree":
            repo = parts[2] + "/" + parts[3]
            if repo not in REPOS:
                return self.send_body(404, b'{"error":"Repository not found"}')
            if REPOS[repo][4] == "gated" and self.headers.get("Authorization") != "Bearer " + TOKEN:
                return self.send_body(401, b'{"error":"gated"}')
            f, _, digest, size, _ = REPOS[repo]
            listing = [{"type": "directory", "path": "docs"},
                       {"type": "file", "path": "README.md", "size": 12},
                       {"type": "file", "path": f, "size": size, "lfs": {"oid": digest, "size": size}}]
            return self.send_body(200, json.dumps(listing).encode())
        if len(parts) >= 5 and parts[2] == "resolve":
            repo = parts[0] + "/" + parts[1]
            if repo not in REPOS or "/".join(parts[4:]) != REPOS[repo][0]:
                return self.send_body(404, b"not found", "text/plain")
            if REPOS[repo][4] == "gated" and self.headers.get("Authorization") != "Bearer " + TOKEN:
                return self.send_body(401, b"gated", "text/plain")
            # The hub redirects LFS files to a blob store.
            return self.send_body(302, b"", "text/plain", [("Location", "/blobs/%s/%s" % (REPOS[repo][1], repo.replace("/", "_")))])
        if parts[0] == "blobs":
            key, who = parts[1], parts[2]
            if key not in BLOBS:
                return self.send_body(404, b"no blob", "text/plain")
            return self.serve_blob(BLOBS[key], who)
        if parts[0] == "plain":
            return self.serve_blob(GOOD, "plain")
        if parts == ["catalog.json"]:
            return self.send_body(200, CATALOG)
        if parts == ["bad-catalog.json"]:
            return self.send_body(200, BAD_CATALOG)
        return self.send_body(404, b"unknown", "text/plain")

    def serve_blob(self, data, who):
        start = 0
        rng_header = self.headers.get("Range")
        if rng_header:
            ranges_seen.append((who, rng_header))
            start = int(rng_header.split("=")[1].split("-")[0])
        body = data[start:]
        self.send_response(206 if rng_header else 200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        if rng_header:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
        self.end_headers()
        if who == "acme_cut" and who not in cut_done:
            cut_done.add(who)
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.connection.shutdown(2)  # the connection dies mid-file
            return
        step = 64 * 1024
        for i in range(0, len(body), step):
            try:
                self.wfile.write(body[i:i + step])
            except (BrokenPipeError, ConnectionResetError):
                return
            if who == "acme_slow":
                time.sleep(0.05)


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = "http://127.0.0.1:%d" % server.server_address[1]
    work = tempfile.mkdtemp(prefix="gb-models-")
    models = os.path.join(work, "models")
    data_home = os.path.join(work, "data")  # XDG_DATA_HOME: the user catalog goes here
    user_catalog = os.path.join(data_home, "glassbox", "catalog.json")
    failures = []

    def run(args, env_extra=None, preexec=None, expect_ok=True, contains=None):
        env = dict(os.environ, HF_ENDPOINT=endpoint, GLASSBOX_MODELS_DIR=models, XDG_DATA_HOME=data_home)
        env.pop("HF_TOKEN", None)
        env.update(env_extra or {})
        p = subprocess.run([CLI, "models"] + args, env=env, capture_output=True, text=True, timeout=120,
                           preexec_fn=preexec)
        ok = p.returncode == 0
        out = p.stdout + p.stderr
        if ok != expect_ok or (contains and contains not in out):
            failures.append("%s: exit %d, expected %s%s\n%s" % (" ".join(args), p.returncode,
                            "success" if expect_ok else "failure", " with '%s'" % contains if contains else "", out))
        return p

    def check(cond, what):
        if not cond:
            failures.append(what)

    def final(name):
        return os.path.join(models, name)

    def leftovers(name):
        return [f for f in os.listdir(models) if f.startswith(name)] if os.path.isdir(models) else []

    # Listing, redirect, sha256: the file under its name, verified.
    p = run(["pull", "acme/good", "--json"], contains="model-Q4_K_M.gguf")
    check(os.path.exists(final("model-Q4_K_M.gguf")) and open(final("model-Q4_K_M.gguf"), "rb").read() == GOOD,
          "acme/good: the downloaded bytes differ")
    check(leftovers("model-Q4_K_M.gguf") == ["model-Q4_K_M.gguf"], "acme/good: leftovers %s" % leftovers("model-Q4_K_M.gguf"))
    if p.returncode == 0:
        check(json.loads(p.stdout)["sha256"] == sha(GOOD), "acme/good: --json sha256")
    run(["pull", "acme/good"], expect_ok=False, contains="exists already")

    # Cut mid-file: the part stays; the next run resumes with a Range request.
    run(["pull", "acme/cut:cut.gguf"], expect_ok=False, contains="resume")
    check(not os.path.exists(final("cut.gguf")) and os.path.exists(final("cut.gguf.part")), "acme/cut: no part kept")
    run(["pull", "acme/cut:cut.gguf"])
    check(any(w == "acme_cut" for w, _ in ranges_seen), "acme/cut: the second run sent no Range request")
    check(os.path.exists(final("cut.gguf")) and open(final("cut.gguf"), "rb").read() == GOOD, "acme/cut: resumed bytes differ")
    check(leftovers("cut.gguf") == ["cut.gguf"], "acme/cut: leftovers %s" % leftovers("cut.gguf"))

    # A wrong sha256: refused, nothing left.
    run(["pull", "acme/wrongsha"], expect_ok=False, contains="sha256")
    check(leftovers("bad.gguf") == [], "acme/wrongsha: leftovers %s" % leftovers("bad.gguf"))

    # 404s: an unknown repository, an unknown file.
    run(["pull", "acme/nothing"], expect_ok=False, contains="404")
    run(["pull", "acme/good:other.gguf"], expect_ok=False, contains="has no file other.gguf")

    # Gated: 401 names HF_TOKEN; with the token it arrives.
    run(["pull", "acme/gated"], expect_ok=False, contains="HF_TOKEN")
    run(["pull", "acme/gated"], env_extra={"HF_TOKEN": TOKEN})
    check(os.path.exists(final("gated.gguf")), "acme/gated: not downloaded with the token")

    # Full disk: a 1 MiB file size limit; writes fail with a clear error.
    def small_fsize():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
    run(["pull", "acme/slow", "--dir", os.path.join(work, "limited")], preexec=small_fsize, expect_ok=False,
        contains="cannot write")
    check(not os.path.exists(os.path.join(work, "limited", "slow.gguf")), "full disk: a final file exists")

    # A stated size no disk has: refused before downloading.
    run(["pull", "acme/huge"], expect_ok=False, contains="disk space")
    check(leftovers("huge.gguf") == [], "acme/huge: leftovers %s" % leftovers("huge.gguf"))

    # Cancel with SIGINT: the part is kept. Two downloads of one file: the second refused.
    env = dict(os.environ, HF_ENDPOINT=endpoint, GLASSBOX_MODELS_DIR=models)
    first = subprocess.Popen([CLI, "models", "pull", "acme/slow"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 30
    while time.time() < deadline and not (os.path.exists(final("slow.gguf.part")) and
                                          os.path.getsize(final("slow.gguf.part")) > 128 * 1024):
        time.sleep(0.05)
    run(["pull", "acme/slow"], expect_ok=False, contains="being downloaded already")
    first.send_signal(signal.SIGINT)
    out, err = first.communicate(timeout=60)
    check(first.returncode != 0 and "cancelled" in err, "cancel: exit %d, %s" % (first.returncode, err))
    check(os.path.exists(final("slow.gguf.part")) and not os.path.exists(final("slow.gguf")), "cancel: part not kept")

    # Not a GGUF file: refused after download, removed.
    run(["pull", "acme/notgguf"], expect_ok=False, contains="not a GGUF")
    check(leftovers("weights.gguf") == [], "notgguf: leftovers %s" % leftovers("weights.gguf"))

    # A plain URL; then a URL of another scheme.
    run(["pull", endpoint + "/plain/tiny.gguf"])
    check(os.path.exists(final("tiny.gguf")), "plain URL: not downloaded")
    run(["pull", "file:///etc/passwd"], expect_ok=False, contains="only http")

    # list and rm.
    p = run(["list", "--json"])
    if p.returncode == 0:
        names = sorted(os.path.basename(m["path"]) for m in json.loads(p.stdout)["models"])
        check(names == ["cut.gguf", "gated.gguf", "model-Q4_K_M.gguf", "tiny.gguf"], "list: %s" % names)
    run(["rm", "tiny.gguf"])
    check(not os.path.exists(final("tiny.gguf")), "rm: still there")
    run(["rm", "../models/cut.gguf"], expect_ok=False)

    # The catalog: the shipped one first (no user copy yet).
    p = run(["catalog", "--json"])
    if p.returncode == 0:
        shipped = json.loads(p.stdout)
        check(not shipped["user_copy"] and shipped["catalog"].endswith(os.path.join("glassbox", "catalog.json"))
              and len(shipped["models"]) >= 6, "catalog: the shipped one %s" % shipped["catalog"])
    # An update from the mimic: the user copy, byte for byte.
    run(["catalog", "--update", endpoint + "/catalog.json"], contains="1 models")
    check(os.path.exists(user_catalog) and open(user_catalog, "rb").read() == CATALOG, "catalog --update: no user copy")
    p = run(["catalog", "--json"])
    if p.returncode == 0:
        listed = json.loads(p.stdout)
        check(listed["user_copy"] and [m["id"] for m in listed["models"]] == ["acme-catalogued"]
              and not listed["models"][0]["downloaded"], "catalog after update: %s" % p.stdout)
    # pull ID: the entry's REPO:FILE, checked against the hub's size and sha256.
    p = run(["pull", "acme-catalogued", "--json"], contains="catalogued-Q4_K_M.gguf")
    check(os.path.exists(final("catalogued-Q4_K_M.gguf")) and open(final("catalogued-Q4_K_M.gguf"), "rb").read() == GOOD,
          "pull acme-catalogued: the downloaded bytes differ")
    if p.returncode == 0:
        check(json.loads(p.stdout)["sha256"] == sha(GOOD), "pull acme-catalogued: --json sha256")
    p = run(["catalog", "--json"])
    if p.returncode == 0:
        check(json.loads(p.stdout)["models"][0]["downloaded"], "catalog: the pulled entry is not downloaded")
    run(["pull", "no-such-id"], expect_ok=False, contains="acme-catalogued")
    # A bad catalog, a missing one, another scheme: refused, the user copy as it was.
    run(["catalog", "--update", endpoint + "/bad-catalog.json"], expect_ok=False, contains="format version 99")
    run(["catalog", "--update", endpoint + "/no-catalog.json"], expect_ok=False, contains="404")
    run(["catalog", "--update", "ftp://example.org/catalog.json"], expect_ok=False, contains="http")
    check(open(user_catalog, "rb").read() == CATALOG, "a failed catalog update changed the user copy")
    check(sorted(os.listdir(os.path.dirname(user_catalog))) == ["catalog.json"],
          "catalog updates left files: %s" % os.listdir(os.path.dirname(user_catalog)))

    server.shutdown()
    shutil.rmtree(work, ignore_errors=True)
    if failures:
        print("models_pull_test: %d failure(s):" % len(failures))
        for f in failures:
            print(" -", f)
        return 1
    print("models_pull_test: all cases passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
