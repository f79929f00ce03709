#!/usr/bin/env python3
"""Make the architecture references in tests/data/arch (Python tooling, never run by CI or tests).

For each architecture: `glassbox-cli synth --arch NAME --seed SEED` writes a small random GGUF with
llama.cpp's key and tensor names; this script reads it back with gguf-py, builds the Hugging Face
transformers model of that architecture from the file's own metadata and tensors (float32, eager
attention), inverting llama.cpp's converter conventions (llama q/k row permutation; Gemma norms stored
as 1 + w), and writes tests/data/arch/<name>.json: the prompt ids, 16 greedy tokens and the top-20
logits of every greedy step. tests/engine/runtime/test_arch_synth_refs.cpp re-creates the model with
the same synth code and seed and compares.

Usage:
  python3 -m venv /work/venv-fix && /work/venv-fix/bin/pip install numpy torch "transformers>=4.57,<5" safetensors gguf
  /work/venv-fix/bin/python tools/make_arch_refs.py --cli build/dev/app/glassbox-cli [NAME ...]
Helpers (ref_forward, summarize, the GGUF -> HF name map) come from ../shared/tools/fixtures/gbfix.py
(override with GBFIX_DIR).
"""
import argparse, hashlib, json, math, os, subprocess, sys, tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.environ.get("GBFIX_DIR", os.path.join(REPO, "..", "shared", "tools", "fixtures")))
import gbfix  # noqa: E402
import gguf  # noqa: E402
import transformers  # noqa: E402

N_GEN = 16
# name -> (seed, prompt lengths). Prompts are random ids >= 3 (past <unk>, <s>, </s>) drawn from the seed.
# Lengths exceed the sliding windows (mistral 8, gemma 6); phi3's exceed its original context (32), so
# transformers uses the LongRoPE long factors, as the engine does for a 256-token context.
ARCHS = {
    "qwen3": (3101, [5, 13, 21]),
    "mistral": (3102, [5, 13, 21]),
    "gemma2": (3123, [5, 13, 21]),
    "gemma3": (3134, [5, 13, 21]),
    "phi3": (3105, [33, 40]),
}


def field(r, key, default=None):
    f = r.fields.get(key)
    if f is None:
        return default
    v = f.contents()
    return v


def hf_model(arch, r):
    """The transformers config and class for a GGUF, from its own metadata."""
    a = field(r, "general.architecture")
    p = a + "."
    n_embd, n_head = field(r, p + "embedding_length"), field(r, p + "attention.head_count")
    head_dim = field(r, p + "attention.key_length", n_embd // n_head)
    tied = not any(t.name == "output.weight" for t in r.tensors)
    common = dict(vocab_size=len(field(r, "tokenizer.ggml.tokens")), hidden_size=n_embd,
                  intermediate_size=field(r, p + "feed_forward_length"),
                  num_hidden_layers=field(r, p + "block_count"), num_attention_heads=n_head,
                  num_key_value_heads=field(r, p + "attention.head_count_kv"), head_dim=head_dim,
                  rms_norm_eps=field(r, p + "attention.layer_norm_rms_epsilon"),
                  max_position_embeddings=field(r, p + "context_length"), tie_word_embeddings=tied,
                  bos_token_id=1, eos_token_id=2, pad_token_id=0, attn_implementation="eager")
    theta = field(r, p + "rope.freq_base")
    if arch == "qwen3":
        return transformers.Qwen3ForCausalLM, transformers.Qwen3Config(rope_theta=theta, attention_bias=False, **common)
    if arch == "mistral":
        return transformers.MistralForCausalLM, transformers.MistralConfig(
            rope_theta=theta, sliding_window=field(r, p + "attention.sliding_window"), **common)
    if arch == "gemma2":
        # llama.cpp's rule (the scalar is not in GGUF): query_pre_attn_scalar = head_dim below 27B.
        return transformers.Gemma2ForCausalLM, transformers.Gemma2Config(
            rope_theta=theta, query_pre_attn_scalar=head_dim, sliding_window=field(r, p + "attention.sliding_window"),
            attn_logit_softcapping=field(r, p + "attn_logit_softcapping"),
            final_logit_softcapping=field(r, p + "final_logit_softcapping"),
            hidden_activation="gelu_pytorch_tanh", **common)
    if arch == "gemma3":
        scaling = None
        if field(r, p + "rope.scaling.type") == "linear":
            scaling = {"rope_type": "linear", "factor": float(field(r, p + "rope.scaling.factor"))}
        return transformers.Gemma3ForCausalLM, transformers.Gemma3TextConfig(
            rope_theta=theta, rope_local_base_freq=10000.0, rope_scaling=scaling, query_pre_attn_scalar=head_dim,
            sliding_window=field(r, p + "attention.sliding_window"), final_logit_softcapping=None,
            attn_logit_softcapping=None, hidden_activation="gelu_pytorch_tanh", **common)
    if arch == "phi3":
        t = {x.name: x for x in r.tensors}
        long_f = [float(x) for x in np.array(t["rope_factors_long.weight"].data, dtype=np.float64)]
        short_f = [float(x) for x in np.array(t["rope_factors_short.weight"].data, dtype=np.float64)]
        common.pop("head_dim")
        return transformers.Phi3ForCausalLM, transformers.Phi3Config(
            rope_theta=theta, original_max_position_embeddings=field(r, p + "rope.scaling.original_context_length"),
            rope_scaling={"type": "longrope", "long_factor": long_f, "short_factor": short_f},
            sliding_window=None, **common)
    raise SystemExit("unknown arch " + arch)


def state_dict(path, r, model, arch):
    """GGUF tensors -> HF names (gguf-py's own name map), with the converter's changes undone."""
    cfg = model.config
    arch_enum = {v: k for k, v in gguf.MODEL_ARCH_NAMES.items()}[field(r, "general.architecture")]
    nmap = gguf.get_tensor_name_map(arch_enum, cfg.num_hidden_layers)
    tens = {t.name: t for t in r.tensors}
    sd, used = {}, set()
    for key, p in model.state_dict().items():
        if "rotary_emb" in key:
            continue
        name = nmap.get_name(key, try_suffixes=(".weight", ".bias"))
        if name is None or name not in tens:
            if key == "lm_head.weight" and cfg.tie_word_embeddings:
                continue
            raise KeyError(f"{key} -> {name} not in {path}")
        t = tens[name]
        w = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(tuple(p.shape))
        if arch == "mistral" and name.endswith("attn_q.weight"):
            w = gbfix._unpermute(w, cfg.num_attention_heads)
        elif arch == "mistral" and name.endswith("attn_k.weight"):
            w = gbfix._unpermute(w, cfg.num_key_value_heads)
        if arch.startswith("gemma") and name.endswith("norm.weight"):
            w = w - 1.0  # convert_hf_to_gguf.py stores Gemma's (1 + w) norms with the 1 added
        sd[key] = torch.from_numpy(np.ascontiguousarray(w))
        used.add(name)
    return sd, [n for n in tens if n not in used]


def step_record(row):
    s = gbfix.summarize(torch.from_numpy(row))
    return {"top_ids": s["top_ids"], "top_logits": [float("%.7g" % x) for x in s["top_logits"]], "margin": s["margin"]}


def build_synth(arch, cli, work):
    """Writes the synth GGUF of `arch` into `work` and returns (path, reader, HF class, float32 HF model, unused)."""
    seed, _ = ARCHS[arch]
    path = os.path.join(work, arch + ".gguf")
    subprocess.run([cli, "synth", "--arch", arch, "--seed", str(seed), "--out", path], check=True)
    r = gguf.GGUFReader(path)
    cls, cfg = hf_model(arch, r)
    torch.manual_seed(0)
    model = cls(cfg).float().eval()
    sd, unused = state_dict(path, r, model, arch)
    missing, unexpected = model.load_state_dict(sd, strict=False)
    missing = [k for k in missing if not (k == "lm_head.weight" and cfg.tie_word_embeddings)]
    assert not missing and not unexpected, (missing, unexpected)
    if cfg.tie_word_embeddings:
        model.tie_weights()
    return path, r, cls, model, unused


def prompt_ids(arch, vocab_size):
    """The prompts of `arch`: random ids >= 3 drawn from its seed, in ARCHS order."""
    seed, lengths = ARCHS[arch]
    g = np.random.default_rng(seed)
    return [[int(x) for x in g.integers(3, vocab_size, n)] for n in lengths]


def make(arch, cli, out_dir, work):
    seed, lengths = ARCHS[arch]
    path, r, cls, model, unused = build_synth(arch, cli, work)
    cfg = model.config
    prompts = []
    for i, ids in enumerate(prompt_ids(arch, cfg.vocab_size)):
        pl, gen, gl = gbfix.ref_forward(model, ids, n_gen=N_GEN)
        if 1 in gen:  # the engine stops at BOS (1) whatever ignore_eos says: choose another seed
            raise SystemExit(f"{arch}: greedy path reaches BOS; pick another seed")
        steps = [step_record(gl[k]) for k in range(gl.shape[0])]
        prompts.append({"name": "p%d" % i, "ids": ids, "greedy": {"ids": [int(t) for t in gen], "steps": steps},
                        "min_greedy_margin": min(s["margin"] for s in steps)})
    doc = {"schema": "glassbox-arch-ref-v1", "arch": arch, "architecture": field(r, "general.architecture"),
           "synth": f"glassbox-cli synth --arch {arch} --seed {seed}", "seed": seed,
           "model_sha256": gbfix.sha256(path), "context_length": 256, "top_k": gbfix.TOPK, "n_gen": N_GEN,
           "reference": f"float32 transformers {cls.__name__} (eager attention) of the GGUF tensors read with gguf-py, "
                        "converter conventions undone (llama q/k permutation, Gemma norm 1+w)",
           "unused_gguf_tensors": unused, "versions": gbfix.versions(), "prompts": prompts}
    doc["versions"].pop("llama_cpp_commit", None)
    out = os.path.join(out_dir, arch + ".json")
    with open(out, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    print(arch, cls.__name__, "unused", unused, "min margin", min(p["min_greedy_margin"] for p in prompts),
          "bytes", os.path.getsize(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default=os.path.join(REPO, "build", "dev", "app", "glassbox-cli"))
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "data", "arch"))
    ap.add_argument("archs", nargs="*", default=list(ARCHS))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        for arch in a.archs:
            make(arch, a.cli, a.out, work)


if __name__ == "__main__":
    main()
