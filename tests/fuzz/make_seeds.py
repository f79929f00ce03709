#!/usr/bin/env python3
"""Writes the small hand-made seeds in tests/fuzz/corpus/ (a few KB each).

Written from the format descriptions in engine/model/gguf_file.h,
engine/model/llama2c_file.h and engine/tokenizer/llama2c_tokenizer.h, with no
shared data: tiny but complete models (dim 8, one block, a 16-token vocabulary),
so the model harnesses start from files that load all the way. Run it again
after changing it; the outputs are committed.
    python3 tests/fuzz/make_seeds.py
"""
import base64
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")

DIM, HIDDEN, LAYERS, HEADS, KV_HEADS, CTX = 8, 16, 1, 2, 1, 16
VOCAB = ["<unk>", "<s>", "</s>", "\u2581", "a", "b", "c", "\u2581a", "\u2581b", "ab", "ba", "\u2581ab",
         "<0x0A>", "<0x20>", "<|im_start|>", "<|im_end|>"]
TYPES = [2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 6, 6, 3, 3]
BPE_VOCAB = ["a", "b", "c", "\u0120", "\u0120a", "ab", "\u0120ab", "\u010a", "<|eot|>"] + [chr(0x100 + i) for i in range(7)]
BPE_MERGES = ["\u0120 a", "a b", "\u0120a b"]

# GGUF value type codes.
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)


def gstr(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def gval(t, v):
    if t == STR:
        return gstr(v)
    if t == ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(gval(et, x) for x in items)
    fmt = {U8: "B", I8: "b", U16: "H", I16: "h", U32: "I", I32: "i", F32: "f", BOOL: "?", U64: "Q", I64: "q", F64: "d"}[t]
    return struct.pack("<" + fmt, v)


def floats(n, seed):
    return [((i * 37 + seed * 11) % 17 - 8) / 16.0 for i in range(n)]


def gguf(metadata, tensors, alignment=32):
    """metadata: [(key, type, value)]; tensors: [(name, dims (ne order), f32 list)]."""
    out = struct.pack("<IIQQ", 0x46554747, 3, len(tensors), len(metadata))
    for k, t, v in metadata:
        out += gstr(k) + struct.pack("<I", t) + gval(t, v)
    offset = 0
    data = b""
    for name, dims, values in tensors:
        out += gstr(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", 0, offset)  # F32
        blob = struct.pack("<%df" % len(values), *values)
        pad = (-len(blob)) % alignment
        data += blob + b"\0" * pad
        offset += len(blob) + pad
    out += b"\0" * ((-len(out)) % alignment)
    return out + data


def llama_metadata(vocab_size, arch="llama"):
    return [
        ("general.architecture", STR, arch), ("general.name", STR, "fuzz seed"),
        (arch + ".context_length", U32, CTX), (arch + ".embedding_length", U32, DIM),
        (arch + ".feed_forward_length", U32, HIDDEN), (arch + ".attention.head_count", U32, HEADS),
        (arch + ".attention.head_count_kv", U32, KV_HEADS), (arch + ".block_count", U32, LAYERS),
        (arch + ".rope.dimension_count", U32, DIM // HEADS),
        (arch + ".attention.layer_norm_rms_epsilon", F32, 1e-5),
    ]


def llama_tensors(vocab_size, untied=False):
    kv = KV_HEADS * DIM // HEADS
    t = [("token_embd.weight", [DIM, vocab_size], floats(DIM * vocab_size, 1)),
         ("output_norm.weight", [DIM], [1.0] * DIM)]
    if untied:
        t.append(("output.weight", [DIM, vocab_size], floats(DIM * vocab_size, 2)))
    for l in range(LAYERS):
        b = "blk.%d." % l
        t += [(b + "attn_norm.weight", [DIM], [1.0] * DIM), (b + "attn_q.weight", [DIM, DIM], floats(DIM * DIM, 3)),
              (b + "attn_k.weight", [DIM, kv], floats(DIM * kv, 4)), (b + "attn_v.weight", [DIM, kv], floats(DIM * kv, 5)),
              (b + "attn_output.weight", [DIM, DIM], floats(DIM * DIM, 6)), (b + "ffn_norm.weight", [DIM], [1.0] * DIM),
              (b + "ffn_gate.weight", [DIM, HIDDEN], floats(DIM * HIDDEN, 7)),
              (b + "ffn_down.weight", [HIDDEN, DIM], floats(DIM * HIDDEN, 8)),
              (b + "ffn_up.weight", [DIM, HIDDEN], floats(DIM * HIDDEN, 9))]
    return t


def spm_vocab_metadata():
    return [
        ("tokenizer.ggml.model", STR, "llama"), ("tokenizer.ggml.tokens", ARR, (STR, VOCAB)),
        ("tokenizer.ggml.scores", ARR, (F32, [-float(i) for i in range(len(VOCAB))])),
        ("tokenizer.ggml.token_type", ARR, (I32, TYPES)),
        ("tokenizer.ggml.bos_token_id", U32, 1), ("tokenizer.ggml.eos_token_id", U32, 2),
        ("tokenizer.ggml.unknown_token_id", U32, 0), ("tokenizer.ggml.add_bos_token", BOOL, True),
        ("tokenizer.chat_template", STR, "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
                                         "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"),
    ]


def bpe_vocab_metadata():
    return [
        ("tokenizer.ggml.model", STR, "gpt2"), ("tokenizer.ggml.pre", STR, "llama-bpe"),
        ("tokenizer.ggml.tokens", ARR, (STR, BPE_VOCAB)),
        ("tokenizer.ggml.token_type", ARR, (I32, [1] * 8 + [3] + [1] * 7)),
        ("tokenizer.ggml.merges", ARR, (STR, BPE_MERGES)),
        ("tokenizer.ggml.bos_token_id", U32, 8), ("tokenizer.ggml.eos_token_id", U32, 8),
    ]


def llama2c(version):
    v = len(VOCAB)
    kv = KV_HEADS * DIM // HEADS
    header7 = struct.pack("<7i", DIM, HIDDEN, LAYERS, HEADS, KV_HEADS, v, CTX)
    emb, att = floats(v * DIM, 1), [1.0] * (LAYERS * DIM)
    wq, wk, wv, wo = floats(LAYERS * DIM * DIM, 2), floats(LAYERS * kv * DIM, 3), floats(LAYERS * kv * DIM, 4), floats(LAYERS * DIM * DIM, 5)
    w1, w2, w3 = floats(LAYERS * HIDDEN * DIM, 6), floats(LAYERS * DIM * HIDDEN, 7), floats(LAYERS * HIDDEN * DIM, 8)
    fin = [1.0] * DIM
    f = lambda xs: struct.pack("<%df" % len(xs), *xs)
    if version == 0:
        freq = [0.0] * (CTX * (DIM // HEADS) // 2)
        return header7 + f(emb) + f(att) + f(wq) + f(wk) + f(wv) + f(wo) + f(att) + f(w1) + f(w2) + f(w3) + f(fin) + f(freq) + f(freq)
    header = struct.pack("<Ii", 0x616B3432, 1) + header7 + struct.pack("<B", 1)
    header += b"\0" * (256 - len(header))
    return header + f(att) + f(att) + f(fin) + f(emb) + f(wq) + f(wk) + f(wv) + f(wo) + f(w1) + f(w2) + f(w3)


def tokenizer_bin():
    pieces = ["<unk>", "\n<s>\n", "\n</s>\n"] + ["<0x%02X>" % b for b in (10, 32)] + [" ", "a", "b", " a", "ab", " ab", "ba"]
    out = struct.pack("<I", max(len(p.encode()) for p in pieces))
    for i, p in enumerate(pieces):
        b = p.encode()
        out += struct.pack("<fI", -float(i), len(b)) + b
    return out


def openai_requests():
    """Bodies of POST /v1/completions and /v1/chat/completions: valid ones with
    every kind of field, and near-valid ones (a mistyped content part, a
    response_format whose type is a number)."""
    user = {"role": "user", "content": "Once upon a time"}
    return {
        "completion-basic.json": {"prompt": "Once upon a time", "max_tokens": 16, "temperature": 0},
        "completion-all-fields.json": {
            "model": "stories260K", "prompt": ["a", "b"], "n": 2, "max_tokens": 8, "seed": 7, "stream": True,
            "stream_options": {"include_usage": True}, "temperature": 0.7, "top_p": 0.9, "top_k": 40, "min_p": 0.05,
            "typical_p": 0.95, "repetition_penalty": 1.1, "penalty_last_n": 64, "presence_penalty": 0.5,
            "frequency_penalty": -0.5, "dry_multiplier": 0.8, "dry_base": 1.75, "dry_allowed_length": 2,
            "dry_penalty_last_n": -1, "xtc_threshold": 0.1, "xtc_probability": 0.5, "stop": ["\n", "."],
            "logit_bias": {"5": -100, "7": 2.5}, "stop_token_ids": [2], "ignore_eos": False, "logprobs": 3},
        "completion-token-ids.json": {"prompt": [[1, 2, 3], [4, 5]], "max_tokens": 4},
        "completion-echo.json": {"prompt": "score me", "echo": True, "max_tokens": 0, "logprobs": 5},
        "chat-basic.json": {"messages": [{"role": "system", "content": "Be brief."}, user], "max_tokens": 16},
        "chat-all-fields.json": {
            "messages": [{"role": "developer", "content": "x"},
                         {"role": "user", "content": [{"type": "text", "text": "Hello "}, {"type": "text", "text": "there"}]},
                         {"role": "assistant", "content": None}, {"role": "tool", "content": "42"}],
            "logprobs": True, "top_logprobs": 2, "max_completion_tokens": 5, "stream": True,
            "stream_options": {"include_usage": True}, "chat_template_kwargs": {"enable_thinking": False},
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
                "a": {"type": "array", "items": {"type": "string"}}}}}}],
            "tool_choice": "auto", "response_format": {"type": "text"}},
        "chat-part-type-number.json": {"messages": [{"role": "user", "content": [{"type": 1, "text": "x"}]}]},
        "chat-response-format-type-number.json": {"messages": [user], "response_format": {"type": 1}},
    }


def remote_answers():
    """Answers of a remote OpenAI-compatible server as RemoteClient reads them
    (engine/client/remote_response.h): a model list, streamed chunks (whole
    server-sent-event streams, completions and chat, with logprobs and usage), a
    completion with n = 2, an echo score, an error and Prometheus metrics."""
    def sse(chunks):
        return "".join("data: " + json.dumps(c) + "\n\n" for c in chunks) + "data: [DONE]\n\n"
    comp_lp = {"tokens": [" a", " b"], "token_logprobs": [-0.5, -1.25],
               "top_logprobs": [{" a": -0.5, " c": -2.0}, {" b": -1.25, " d": -1.5}]}
    chat_lp = {"content": [{"token": " a", "logprob": -0.5, "top_logprobs": [{"token": " a", "logprob": -0.5},
                                                                            {"token": " c", "logprob": -2.0}]}]}
    usage = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7, "prompt_tokens_details": {"cached_tokens": 4}}
    return {
        "models.json": json.dumps({"object": "list", "data": [{"id": "stories260K", "object": "model"}, {"id": "b"}]}),
        "stream-completion.txt": sse([
            {"object": "text_completion", "choices": [{"index": 0, "text": " a b", "logprobs": comp_lp, "finish_reason": None}]},
            {"choices": [{"index": 0, "text": "", "finish_reason": "length"}], "usage": None},
            {"choices": [], "usage": usage}]),
        "stream-chat.txt": sse([
            {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
            {"choices": [{"index": 0, "delta": {"content": " a"}, "logprobs": chat_lp, "finish_reason": None}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
            {"choices": [], "usage": usage}]),
        "chunk-chat.json": json.dumps({"choices": [{"index": 0, "delta": {"content": " a"}, "logprobs": chat_lp}]}),
        "completion-n2.json": json.dumps({"object": "text_completion", "choices": [
            {"index": 1, "text": " b", "finish_reason": "length", "logprobs": comp_lp},
            {"index": 0, "text": " a", "finish_reason": "stop", "logprobs": None}], "usage": usage}),
        "echo-score.json": json.dumps({"choices": [{"index": 0, "text": "a b", "logprobs": {
            "tokens": ["a", " b", " c"], "token_logprobs": [None, -0.75, -2.5],
            "top_logprobs": [None, {" b": -0.75, " x": -1.0}, {" d": -0.5}]}}]}),
        "error.json": json.dumps({"error": {"message": "Unsupported param: echo", "type": "invalid_request_error",
                                            "param": None, "code": 400}}),
        "error-in-stream.txt": sse([{"error": {"message": "the queue is full", "code": 503}}]),
        "chunk-token-type-number.json": json.dumps({"choices": [{"delta": {"content": "x"}, "logprobs": {
            "content": [{"token": 5, "logprob": "x"}]}}], "usage": {"prompt_tokens": "5"}}),
        "metrics.txt": "# TYPE glassbox_num_requests_running gauge\nglassbox_num_requests_running 2\n"
                       "vllm:num_requests_waiting{model_name=\"m\"} 4.0\nllamacpp:kv_cache_usage_ratio 0.25\n"
                       "glassbox_prefix_cache_hits_total 5\nglassbox_prefix_cache_queries_total 20\n",
    }


def catalogs():
    """Model catalogs (engine/download/catalog.h; the shipped one is a seed of
    its own, tools/fuzz.sh): the smallest valid one, one with every optional
    and unknown field, and near-valid ones (a newer format, a file leaving the
    repository, an id twice, a size as text)."""
    entry = {"id": "tiny-1", "name": "Tiny", "repo": "acme/tiny-GGUF", "file": "tiny-Q4_K_M.gguf",
             "size_bytes": 1000000, "weight_type": "Q4_K_M", "architecture": "llama", "parameters": 1000,
             "context_length": 2048, "license": "mit", "description": "A tiny model."}
    full = dict(entry, id="tiny-2", file="sub/dir/tiny-Q8_0.gguf", kv_bytes_per_token=4096, tags=["chat"])

    def doc(*models, version=1, **extra):
        return dict({"format_version": version, "models": list(models)}, **extra)
    return {
        "minimal.json": doc(entry),
        "full.json": doc(entry, full, about="unknown fields are ignored", published="2027-01-01"),
        "newer-format.json": doc(entry, version=2),
        "file-leaves-repo.json": doc(dict(entry, file="../../etc/x.gguf")),
        "id-twice.json": doc(entry, dict(full, id="tiny-1")),
        "size-as-text.json": doc(dict(entry, size_bytes="1000000")),
    }


def http_requests():
    """Raw requests as a client sends them (the http_request harness): GET and
    POST with Content-Length and chunked bodies, keys, origins, a preflight,
    extension-laden chunks, oversized and malformed framing."""
    body = json.dumps({"prompt": "Once", "max_tokens": 2})
    chat = json.dumps({"messages": [{"role": "user", "content": "hi"}], "stream": True})
    def post(path, b, extra=""):
        return (f"POST {path} HTTP/1.1\r\nHost: localhost:8080\r\nAuthorization: Bearer key-1\r\n{extra}"
                f"Content-Type: application/json\r\nContent-Length: {len(b)}\r\n\r\n{b}")
    def chunked(path, b, size_suffix=""):
        half = len(b) // 2
        parts = [b[:half], b[half:]]
        framed = "".join(f"{len(p):x}{size_suffix}\r\n{p}\r\n" for p in parts) + "0\r\nX-Trailer: 1\r\n\r\n"
        return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer key-1\r\n"
                f"Transfer-Encoding: chunked\r\n\r\n{framed}")
    return {
        "get-health.txt": "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "get-model-escaped.txt": "GET /v1/models/stories%32%36%30K?x=1 HTTP/1.1\r\nHost: [::1]:8080\r\n"
                                 "Authorization: Bearer key-1\r\nConnection: close\r\n\r\n",
        "post-completions.txt": post("/v1/completions", body),
        "post-chat-origin.txt": post("/v1/chat/completions", chat, "Origin: http://ok.example\r\n"),
        "post-chunked.txt": chunked("/v1/completions", body),
        "post-chunked-ext.txt": chunked("/v1/chat/completions", chat, ";name=value"),
        "post-bad-key.txt": post("/v1/completions", body).replace("key-1", "key-2"),
        "post-rebinding.txt": post("/v1/completions", body).replace("localhost:8080", "evil.example"),
        "options-preflight.txt": "OPTIONS /v1/completions HTTP/1.1\r\nHost: localhost\r\nOrigin: http://ok.example\r\n"
                                 "Access-Control-Request-Method: POST\r\n\r\n",
        "post-expect.txt": post("/v1/completions", body, "Expect: 100-continue\r\n"),
        "post-too-long.txt": "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: 99999999\r\n\r\n{",
        "post-bad-chunk.txt": "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n"
                              "-5\r\nabc\r\n0\r\n\r\n",
        "http10.txt": "GET /v1/models HTTP/1.0\r\nAuthorization: Bearer key-1\r\n\r\n",
    }


def grammar_seeds():
    """JSON schemas for fuzz_json_schema (one schema a file; the harness also gets
    the suite's files, whole, as seeds) and regexes for fuzz_regex."""
    schemas = {
        "object.json": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                        "age": {"type": "integer", "minimum": 0, "maximum": 150}}, "required": ["name"],
                        "additionalProperties": False},
        "recursive.json": {"$defs": {"n": {"type": "array", "items": {"$ref": "#/$defs/n"}, "maxItems": 3}},
                           "$ref": "#/$defs/n"},
        "combinators.json": {"anyOf": [{"type": "string", "pattern": "^[a-z]+$"}, {"enum": [1, 2.5, None, [True]]}],
                             "allOf": [{"minLength": 1}]},
        "one_of.json": {"oneOf": [{"type": "object", "properties": {"k": {"const": "a"}}, "required": ["k"]},
                                  {"type": "number", "exclusiveMinimum": -1.5}]},
        "prefix_items.json": {"type": "array", "prefixItems": [{"type": "boolean"}, {"type": "null"}],
                              "items": {"type": "number"}, "minItems": 1},
    }
    regexes = {"anchors.re": "^a+(b|c)*$", "classes.re": "[^\\d\\s]{2,4}\\w?", "escapes.re": "\\x41\\u00e9\\t.",
               "groups.re": "(?:ab|(?<n>cd))+?x{1,3}", "bad.re": "(a)\\1(?=b)"}
    return schemas, regexes


def gbnf_seeds():
    """GBNF grammars for fuzz_gbnf: every construct once, and a few errors."""
    return {
        "json.gbnf": 'root ::= value\nvalue ::= object | array | string | number | "true" | "false" | "null"\n'
                     'object ::= "{" ws ( string ":" ws value ( "," ws string ":" ws value )* )? "}"\n'
                     'array ::= "[" ws ( value ( "," ws value )* )? "]"\n'
                     'string ::= "\\"" ( [^"\\\\] | "\\\\" ["\\\\/bfnrt] )* "\\""\n'
                     'number ::= "-"? [0-9]+ ( "." [0-9]{1,4} )?\nws ::= [ \\t\\n]{0,3}\n',
        "repeat.gbnf": 'root ::= ( "ab" | [x-z] ){2,5} "." ( "c"+ )? [^a-c]{,2} .\n',
        "utf8.gbnf": 'root ::= "\\u00e9\\x41" [\u03b1-\u03c9]+ "\U0001F600"?  # comment\n',
        "nested.gbnf": 'root ::= ( "(" root ")" )*\n',
        "left.gbnf": 'root ::= root "a" | "b"\n',
        "undefined.gbnf": 'root ::= missing\n',
        # Found by fuzz_gbnf: a walk interned new states while a mask held a
        # reference into the state table (use after free).
        "crash-state-reference.gbnf": base64.b64decode("cm9vdCA6Oj0gKCAiYWIiIHwgWzoAAABsPSAoICJhYiIgfCBbeC16XSApezIsNX0K"),
    }


def write(name, filename, data):
    d = os.path.join(CORPUS, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, filename), "wb") as fh:
        fh.write(data if isinstance(data, bytes) else data.encode("utf-8"))


def main():
    v = len(VOCAB)
    model = gguf(llama_metadata(v) + spm_vocab_metadata(), llama_tensors(v))
    untied = gguf(llama_metadata(v) + spm_vocab_metadata() + [("general.alignment", U32, 64)], llama_tensors(v, True), 64)
    bpe_model = gguf(llama_metadata(len(BPE_VOCAB)) + bpe_vocab_metadata(), llama_tensors(len(BPE_VOCAB)))
    for name in ("gguf", "gguf_model"):
        write(name, "tiny-llama-spm.gguf", model)
        write(name, "tiny-llama-untied.gguf", untied)
        write(name, "tiny-llama-bpe.gguf", bpe_model)
    write("gguf", "metadata-all-types.gguf", gguf([
        ("u8", U8, 1), ("i8", I8, -1), ("u16", U16, 2), ("i16", I16, -2), ("u32", U32, 3), ("i32", I32, -3),
        ("f32", F32, 0.5), ("bool", BOOL, True), ("str", STR, "x"), ("u64", U64, 4), ("i64", I64, -4), ("f64", F64, 0.25),
        ("arr.u8", ARR, (U8, [1, 2])), ("arr.str", ARR, (STR, ["a", ""])), ("arr.arr", ARR, (ARR, [(U32, [1]), (STR, ["b"])])),
    ], []))
    write("gguf_vocab", "tiny-spm-vocab.gguf", gguf(spm_vocab_metadata(), []))
    write("gguf_vocab", "tiny-bpe-vocab.gguf", gguf(bpe_vocab_metadata(), []))
    write("llama2c", "tiny-legacy.bin", llama2c(0))
    write("llama2c", "tiny-v1.bin", llama2c(1))
    write("tokenizer_bin", "tiny-tokenizer.bin", tokenizer_bin())
    for filename, body in openai_requests().items():
        write("openai_request", filename, json.dumps(body))
    schemas, regexes = grammar_seeds()
    for filename, schema in schemas.items():
        write("json_schema", filename, json.dumps(schema))
    for filename, pattern in regexes.items():
        write("regex", filename, pattern)
    for filename, text in gbnf_seeds().items():
        write("gbnf", filename, text)
    for filename, text in remote_answers().items():
        write("remote_response", filename, text)
    for filename, body in catalogs().items():
        write("catalog", filename, json.dumps(body, indent=1))
    for filename, text in http_requests().items():
        write("http_request", filename, text)


if __name__ == "__main__":
    main()
