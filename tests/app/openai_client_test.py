#!/usr/bin/env python3
"""Drives `glassbox-cli serve` with the official `openai` Python client.

Usage: openai_client_test.py GLASSBOX_CLI MODEL VENV_DIR

Installs `openai` from PyPI into VENV_DIR (kept between runs) and re-runs itself
there. Exits 77 (CTest: skipped) with a clear message when the venv cannot be
made or PyPI cannot be reached: the suite never fails for lack of network.
Checks: models.list, completions and chat completions with and without
streaming, logprobs shapes, seeds, n, stop, usage with cached tokens, stream
cancellation freeing the request's blocks, and the client's error classes for
400, 401, 404 and 413. Structured output (issue #40): response_format
json_object and json_schema answers parse and validate under the `jsonschema`
package (independent of the server's schema compiler), the client's parse()
helper with a pydantic model, tools with tool_choice "required" and a named
function (arguments valid under the function's parameters), pydantic function
tools through parse() and the stream() helper, and raw streamed tool-call
deltas. Loopback only; every wait is bounded.
"""
import os
import subprocess
import sys
import time
import urllib.request

SKIP = 77


PACKAGES = ["openai", "jsonschema"]


def ensure_openai(venv):
    try:
        import openai  # noqa: F401
        import jsonschema  # noqa: F401
        return
    except ImportError:
        pass
    if os.environ.get("GLASSBOX_IN_VENV") == "1":
        print("SKIP: the openai package is not importable in the venv", flush=True)
        sys.exit(SKIP)
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        r = subprocess.run([sys.executable, "-m", "venv", venv], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            print("SKIP: cannot create a Python venv (python3-venv missing?): " + r.stderr.strip()[-300:], flush=True)
            sys.exit(SKIP)
    r = subprocess.run([python, "-c", "import openai, jsonschema"], capture_output=True)
    if r.returncode != 0:
        try:
            r = subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check"] + PACKAGES,
                               capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            print("SKIP: pip install openai timed out (PyPI unreachable?)", flush=True)
            sys.exit(SKIP)
        if r.returncode != 0:
            print("SKIP: cannot install " + " and ".join(PACKAGES) + " from PyPI: " + r.stderr.strip()[-300:], flush=True)
            sys.exit(SKIP)
    env = dict(os.environ, GLASSBOX_IN_VENV="1")
    sys.exit(subprocess.run([python] + sys.argv, env=env).returncode)


class Server:
    def __init__(self, cli, model, *extra):
        self.proc = subprocess.Popen([cli, "serve", "--model", model, "--port", "0", "--threads", "1", *extra],
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if "http://" not in line:
            raise SystemExit("serve did not print its address: " + line)
        self.url = line[line.index("http://"):].split()[0]

    def metrics(self):
        with urllib.request.urlopen(self.url + "/metrics", timeout=30) as r:
            out = {}
            for line in r.read().decode().splitlines():
                if line and not line.startswith("#"):
                    name, value = line.rsplit(" ", 1)
                    out[name] = float(value)
            return out

    def stop(self):
        self.proc.terminate()
        assert self.proc.wait(timeout=60) == 0, "serve must exit 0 on SIGTERM"


def check(cond, what):
    if not cond:
        raise AssertionError(what)
    print("ok  " + what, flush=True)


def run(cli, model):
    import openai
    print("openai " + openai.__version__, flush=True)
    server = Server(cli, model)
    try:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="tenant-a", max_retries=0, timeout=120)
        models = client.models.list()
        check([m.id for m in models.data] == ["stories260K"], "models.list names the served model")

        prompt = "Once upon a time"
        c = client.completions.create(model="stories260K", prompt=prompt, max_tokens=32, temperature=0, logprobs=2)
        text = c.choices[0].text
        check(len(text) > 0 and c.choices[0].finish_reason in ("stop", "length"), "completions: text and finish_reason")
        lp = c.choices[0].logprobs
        check(len(lp.tokens) == c.usage.completion_tokens == len(lp.token_logprobs) == len(lp.top_logprobs),
              "completions logprobs: one entry per token")
        check("".join(lp.tokens) == text, "completions logprobs: tokens join to the text")
        parts = [ch.choices[0].text for ch in client.completions.create(
            model="stories260K", prompt=prompt, max_tokens=32, temperature=0, stream=True) if ch.choices]
        check("".join(parts) == text, "completions stream: chunks join to the non-streamed text")

        msgs = [{"role": "system", "content": "Lily had a big dog named Max. Max liked to run in the park and play with "
                                              "the ball. One day, Lily and Max went to the park together. "}, {"role": "user", "content": "One day"}]
        chat = client.chat.completions.create(model="stories260K", messages=msgs, max_tokens=24, temperature=0,
                                              logprobs=True, top_logprobs=3)
        content = chat.choices[0].message.content
        check(chat.choices[0].message.role == "assistant" and len(content) > 0, "chat: assistant message")
        entries = chat.choices[0].logprobs.content
        check(len(entries) == chat.usage.completion_tokens and all(len(e.top_logprobs) == 3 for e in entries),
              "chat logprobs: one entry per token, 3 alternatives each")
        check(all(e.token == e.top_logprobs[0].token and e.logprob <= 0 for e in entries),
              "chat logprobs: greedy picks the top alternative")
        stream = client.chat.completions.create(model="stories260K", messages=msgs, max_tokens=24, temperature=0,
                                                stream=True, stream_options={"include_usage": True})
        deltas, usage = [], None
        for ch in stream:
            if ch.usage:
                usage = ch.usage
            for choice in ch.choices:
                if choice.delta.content:
                    deltas.append(choice.delta.content)
        check("".join(deltas) == content, "chat stream: deltas join to the non-streamed message")
        check(usage is not None and usage.completion_tokens == chat.usage.completion_tokens, "chat stream: usage chunk")
        check(usage.prompt_tokens_details.cached_tokens > 0, "chat stream: the repeated prompt hit the prefix cache")

        a = client.completions.create(model="stories260K", prompt=prompt, max_tokens=20, seed=5, n=3, temperature=1)
        b = client.completions.create(model="stories260K", prompt=prompt, max_tokens=20, seed=5, n=3, temperature=1)
        check([x.text for x in a.choices] == [x.text for x in b.choices] and len(a.choices) == 3,
              "seed: the same seed gives the same n=3 choices")
        cut = text[10:14] if len(text) > 14 else None
        if cut:
            s = client.completions.create(model="stories260K", prompt=prompt, max_tokens=32, temperature=0, stop=[cut])
            check(s.choices[0].text == text[:text.index(cut)], "stop: the text ends before the stop string")

        errors = [
            (openai.BadRequestError, lambda: client.completions.create(model="stories260K", prompt=prompt, temperature=5)),
            (openai.NotFoundError, lambda: client.completions.create(model="gpt-4", prompt=prompt)),
            (openai.APIStatusError, lambda: client.completions.create(model="stories260K", prompt="x" * (2 << 20))),
        ]
        for cls, call in errors:
            try:
                call()
                check(False, cls.__name__ + " raised")
            except cls as e:
                check(isinstance(e.body, dict) and "message" in e.body, "%s (%d) in OpenAI's error shape" % (cls.__name__, e.status_code))
        try:
            client.completions.create(model="stories260K", prompt=prompt, temperature=5)
        except openai.BadRequestError as e:
            check(e.body.get("param") == "temperature", "400 names the parameter")
        structured_output(client)
    finally:
        server.stop()

    secured = Server(cli, model, "--api-key", "right", "--step-interval-ms", "20")
    try:
        wrong = openai.OpenAI(base_url=secured.url + "/v1", api_key="wrong", max_retries=0, timeout=60)
        try:
            wrong.models.list()
            check(False, "401 raised")
        except openai.AuthenticationError:
            check(True, "a wrong key gets AuthenticationError (401)")
        client = openai.OpenAI(base_url=secured.url + "/v1", api_key="right", max_retries=0, timeout=120)
        stream = client.completions.create(model="stories260K", prompt="Once upon a time", max_tokens=400,
                                           stream=True, extra_body={"ignore_eos": True})
        for i, _ in enumerate(stream):
            if i >= 2:
                break
        stream.close()  # hang up mid-stream
        m = {}
        for _ in range(200):
            m = secured.metrics()
            if m.get('glassbox_request_finished_total{reason="cancelled"}', 0) >= 1:
                break
            time.sleep(0.05)
        check(m.get('glassbox_request_finished_total{reason="cancelled"}', 0) == 1, "closing the stream cancels the request")
        check(m["glassbox_kv_blocks_used"] == 0 and m["glassbox_num_requests_running"] == 0, "its KV blocks are freed")
    finally:
        secured.stop()


# Every field bounded: an answer ends within 400 tokens whatever white space the
# model writes between tokens (at most 20 bytes per gap).
PERSON = {"type": "object", "properties": {
    "pet": {"enum": ["cat", "dog", "none"]},
    "name": {"type": "string", "minLength": 1, "maxLength": 8},
    "age": {"type": "integer", "minimum": 0, "maximum": 120}},
    "required": ["pet", "name", "age"], "additionalProperties": False}

WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}, "unit": {"enum": ["c", "f"]}},
           "required": ["city", "unit"], "additionalProperties": False}
ADD = {"type": "object", "properties": {"a": {"type": "integer", "minimum": -99, "maximum": 99},
                                        "b": {"type": "integer", "minimum": -99, "maximum": 99}},
       "required": ["a", "b"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city", "parameters": WEATHER}},
         {"type": "function", "function": {"name": "add", "description": "Adds two numbers", "parameters": ADD}}]


def sdk_helper(client, name):
    """chat.completions.parse / .stream (newer SDKs), else beta.chat.completions's."""
    helper = getattr(client.chat.completions, name, None)
    return helper if helper is not None else getattr(client.beta.chat.completions, name)


def structured_output(client):
    import json
    from typing import Literal

    import jsonschema
    import openai
    from pydantic import BaseModel, Field

    msgs = [{"role": "user", "content": "Once upon a time"}]
    for seed in (1, 2, 3):
        c = client.chat.completions.create(model="stories260K", messages=msgs, max_tokens=400, temperature=1, seed=seed,
                                           response_format={"type": "json_schema", "json_schema": {
                                               "name": "person", "schema": PERSON, "strict": True}})
        check(c.choices[0].finish_reason == "stop", "json_schema (seed %d): the answer ends" % seed)
        content = c.choices[0].message.content
        jsonschema.validate(json.loads(content), PERSON)
        check(content.index('"pet"') < content.index('"name"') < content.index('"age"'),
              "json_schema (seed %d): the content validates under jsonschema, keys in the schema's order" % seed)
    c = client.chat.completions.create(model="stories260K", messages=msgs, max_tokens=480, temperature=1, seed=4, n=4,
                                       response_format={"type": "json_object"})
    ended = [ch for ch in c.choices if ch.finish_reason == "stop"]  # any JSON object is unbounded: some run to max_tokens
    check(all(ch.message.content.startswith("{") for ch in c.choices), "json_object: every answer starts an object")
    check(all(isinstance(json.loads(ch.message.content), dict) for ch in ended),
          "json_object: the %d of 4 answers that ended are JSON objects" % len(ended))
    try:
        client.chat.completions.create(model="stories260K", messages=msgs, response_format={
            "type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string", "format": "email"}}})
        check(False, "an unsupported keyword is refused")
    except openai.BadRequestError as e:
        check(e.body.get("param") == "response_format" and "format" in e.body.get("message", ""),
              "an unsupported schema keyword is a 400 naming response_format and the keyword")

    class Pet(BaseModel):
        name: str = Field(max_length=8)
        age: int = Field(ge=0, le=30)
        kind: Literal["cat", "dog"]

    parsed = sdk_helper(client, "parse")(model="stories260K", messages=msgs, response_format=Pet, max_tokens=400,
                                         temperature=1, seed=5)
    check(isinstance(parsed.choices[0].message.parsed, Pet), "parse(response_format=<pydantic model>) gives the model")

    for seed in (1, 2):
        c = client.chat.completions.create(model="stories260K", messages=msgs, tools=TOOLS, tool_choice="required",
                                           max_tokens=480, temperature=1, seed=seed)
        m = c.choices[0].message
        check(c.choices[0].finish_reason == "tool_calls" and m.tool_calls and m.tool_calls[0].id.startswith("call_"),
              "tool_choice required (seed %d): tool_calls with an id" % seed)
        call = m.tool_calls[0].function
        jsonschema.validate(json.loads(call.arguments), WEATHER if call.name == "get_weather" else ADD)
        check(call.name in ("get_weather", "add"), "tool_choice required: arguments valid under %s's parameters" % call.name)
    c = client.chat.completions.create(model="stories260K", messages=msgs, tools=TOOLS, max_tokens=480, temperature=1,
                                       seed=3, tool_choice={"type": "function", "function": {"name": "add"}})
    call = c.choices[0].message.tool_calls[0].function
    jsonschema.validate(json.loads(call.arguments), ADD)
    check(call.name == "add", "a named function: that function, arguments valid")

    # Raw streamed deltas: the call arrives in delta.tool_calls, the finish says tool_calls.
    calls, finish = {}, None
    for ch in client.chat.completions.create(model="stories260K", messages=msgs, tools=TOOLS, tool_choice="required",
                                             max_tokens=480, temperature=1, seed=6, stream=True):
        for choice in ch.choices:
            for d in choice.delta.tool_calls or []:
                entry = calls.setdefault(d.index, {"name": "", "arguments": ""})
                entry["name"] += d.function.name or ""
                entry["arguments"] += d.function.arguments or ""
            finish = choice.finish_reason or finish
    check(finish == "tool_calls" and len(calls) == 1, "streamed tool call: one call, finish_reason tool_calls")
    jsonschema.validate(json.loads(calls[0]["arguments"]), WEATHER if calls[0]["name"] == "get_weather" else ADD)
    check(True, "streamed tool call: the joined arguments validate")

    class GetWeather(BaseModel):
        city: str = Field(max_length=10)
        unit: Literal["c", "f"]

    tool = openai.pydantic_function_tool(GetWeather)
    parsed = sdk_helper(client, "parse")(model="stories260K", messages=msgs, tools=[tool], tool_choice="required",
                                         max_tokens=480, temperature=1, seed=7)
    check(isinstance(parsed.choices[0].message.tool_calls[0].function.parsed_arguments, GetWeather),
          "parse(tools=[pydantic_function_tool]) gives parsed_arguments")
    events = []
    with sdk_helper(client, "stream")(model="stories260K", messages=msgs, tools=[tool], tool_choice="required",
                                      max_tokens=480, temperature=1, seed=8) as stream:
        for event in stream:
            events.append(event.type)
        final = stream.get_final_completion()
    check("tool_calls.function.arguments.done" in events, "stream() helper: the arguments.done event")
    check(isinstance(final.choices[0].message.tool_calls[0].function.parsed_arguments, GetWeather),
          "stream() helper: the final completion's parsed_arguments")


def main():
    if len(sys.argv) != 4:
        raise SystemExit(__doc__)
    ensure_openai(sys.argv[3])
    run(sys.argv[1], sys.argv[2])
    print("all openai client checks passed", flush=True)


if __name__ == "__main__":
    main()
