#!/usr/bin/env python3
"""Make the "inside the model" references in tests/data/inside (Python tooling, never run by CI or tests).

For each model and each (prompt, position): a float32 Hugging Face transformers forward over the prompt's
ids[0 .. position] (eager attention, output_attentions=True, forward hooks on every decoder layer) gives, per
layer, the attention row of the query `position` for every query head, the residual stream entering and leaving
the layer at `position` (before the final norm), and the logit lens of the layer's output (final norm, output
matrix, final logit soft-cap); plus the top-5 of the model's own logits. The C++ tests of `gb::Engine::inspect`
(docs/inside.md) compare against these files. See tests/data/inside/README.md.

Models: the shared fixtures tiny-llama3, tiny-qwen2 and quant-llama (F16 GGUFs under ../shared/models, loaded
with ../shared/tools/fixtures/gbfix.py as their own references were) and the synth architectures of
tools/make_arch_refs.py (GGUF written by `glassbox-cli synth --arch NAME --seed SEED`, loaded by
make_arch_refs.build_synth).

Usage:
  python3 -m venv /work/venv-fix && /work/venv-fix/bin/pip install numpy torch "transformers>=4.57,<5" safetensors gguf
  /work/venv-fix/bin/python tools/make_inside_refs.py --cli build/headless/app/glassbox-cli [NAME ...]
"""
import argparse, json, math, os, sys, tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SHARED = os.path.normpath(os.environ.get("GB_SHARED", os.path.join(REPO, "..", "shared")))
FIXTURES = os.environ.get("GBFIX_DIR", os.path.join(SHARED, "tools", "fixtures"))
sys.path.insert(0, HERE)
sys.path.insert(0, FIXTURES)
import make_arch_refs as arch_refs  # noqa: E402  (also puts gbfix on the path)
import gbfix  # noqa: E402
import make_tiny_models  # noqa: E402  (the tiny models' HF configs: spec())
import transformers  # noqa: E402

TOP_K = 5
DIGITS = 7

# name -> (GGUF under ../shared, prompts by name from its refs/*.json, llama q/k permutation undone)
SHARED_MODELS = {
    "tiny-llama3": ("models/tiny-llama3/tiny-llama3-F16.gguf", ["capital", "code"], True),
    "tiny-qwen2": ("models/tiny-qwen2/tiny-qwen2-F16.gguf", ["capital", "code"], False),
    "quant-llama": ("models/quant-llama/quant-llama-F16.gguf", ["once", "paragraph"], True),
}
# synth arch -> indices into make_arch_refs.ARCHS[arch] prompts (a short one and the longest one)
SYNTH_PROMPTS = {"qwen3": [0, 2], "mistral": [0, 2], "gemma2": [0, 2], "gemma3": [0, 2], "phi3": [0, 1]}
ALL = list(SHARED_MODELS) + list(SYNTH_PROMPTS)


def r7(x):
    return float("%.*g" % (DIGITS, float(x)))


def r7list(a):
    return [r7(x) for x in np.asarray(a, dtype=np.float64).ravel()]


def quant_llama_config():
    # ../shared/models/quant-llama/README.md "Config" (make_quant_llama.config(), tied output)
    return transformers.LlamaForCausalLM, transformers.LlamaConfig(
        vocab_size=32000, hidden_size=256, intermediate_size=768, num_hidden_layers=4, num_attention_heads=8,
        num_key_value_heads=4, head_dim=32, rope_theta=10000.0, rms_norm_eps=1e-5, max_position_embeddings=2048,
        tie_word_embeddings=True, bos_token_id=1, eos_token_id=2, hidden_act="silu", attention_bias=False,
        mlp_bias=False, torch_dtype="float32", attn_implementation="eager")


def load_shared(name):
    rel, prompt_names, permute = SHARED_MODELS[name]
    path = os.path.join(SHARED, rel)
    if name == "quant-llama":
        cls, cfg = quant_llama_config()
    else:
        sp = make_tiny_models.spec(name.split("-")[1])
        cls, cfg = sp["cls"], sp["cfg"]
        assert sp["permute"] == permute
    model, types, unused = gbfix.load_model_from_gguf(path, cls, cfg, permute)
    model.config._attn_implementation = "eager"
    refdir = os.path.join(os.path.dirname(path), "refs")
    ref = json.load(open(os.path.join(refdir, os.path.basename(path)[:-5] + ".json")))
    assert ref["model_sha256"] == gbfix.sha256(path), "the GGUF is not the one refs/ was made from"
    byname = {p["name"]: p for p in ref["prompts"]}
    prompts = []
    for pn in prompt_names:
        p = byname[pn]
        last = np.fromfile(os.path.join(refdir, p["last_logits_file"]), dtype="<f4")
        prompts.append({"name": pn, "text": p["text"], "ids": p["ids"], "ref": p, "ref_last": last})
    conv = ["gguf-py dequantizes every tensor to float32 (gbfix.load_model_from_gguf)"]
    if permute:
        conv.append("llama q/k row permutation of convert_hf_to_gguf.py undone")
    source = {"gguf": rel, "sha256": ref["model_sha256"],
              "loaded_as": f"{cls.__name__} with the config of the model's README (as its refs/ were made)"}
    return model, source, conv, unused, prompts


def load_synth(arch, cli, work):
    path, r, cls, model, unused = arch_refs.build_synth(arch, cli, work)
    seed, lengths = arch_refs.ARCHS[arch]
    all_ids = arch_refs.prompt_ids(arch, model.config.vocab_size)
    arch_json = os.path.join(REPO, "tests", "data", "arch", arch + ".json")
    aref = json.load(open(arch_json)) if os.path.exists(arch_json) else None
    sha = gbfix.sha256(path)
    if aref is not None:
        assert aref["model_sha256"] == sha, f"{arch}: synth GGUF differs from tests/data/arch/{arch}.json's"
    prompts = []
    for i in SYNTH_PROMPTS[arch]:
        ids = all_ids[i]
        p = {"name": "p%d" % i, "ids": ids}
        if aref is not None:
            assert aref["prompts"][i]["ids"] == ids
            p["arch_ref_top_ids"] = aref["prompts"][i]["greedy"]["steps"][0]["top_ids"]
        prompts.append(p)
    conv = ["gguf-py dequantizes every tensor to float32; HF config built from the GGUF's own metadata "
            "(make_arch_refs.hf_model)"]
    if arch == "mistral":
        conv.append("llama q/k row permutation undone")
    if arch.startswith("gemma"):
        conv.append("Gemma norm weights stored as 1 + w: 1 subtracted")
    if arch == "gemma2":
        conv.append("query_pre_attn_scalar = head_dim (llama.cpp's rule below 27B; not in GGUF)")
    if arch == "gemma3":
        conv.append("rope_local_base_freq 10000 for sliding layers; layer types from transformers' default "
                    "sliding_window_pattern 6 (every 6th layer global)")
    if arch == "phi3":
        conv.append("fused attn_qkv / ffn_up (gate+up) tensors loaded as HF's fused qkv_proj / gate_up_proj; "
                    "LongRoPE long factors forced for every forward (see rope note)")
    source = {"synth": f"glassbox-cli synth --arch {arch} --seed {seed}", "seed": seed, "sha256": sha}
    return model, source, conv, unused, prompts


def force_long_rope(model):
    """Phi-3 LongRoPE: transformers picks the long factors only when the forward's length exceeds
    original_max_position_embeddings; the engine (256-token context) always uses them. Make every forward
    use the long factors, so that a forward over ids[0..position] with position < 32 matches."""
    re = model.model.rotary_emb
    orig = re.config.original_max_position_embeddings
    long_inv, _ = re.rope_init_fn(re.config, None, seq_len=orig + 1)
    re.long_inv_freq = long_inv
    re.original_inv_freq = long_inv
    re.register_buffer("inv_freq", long_inv, persistent=False)


def layer_windows(cfg):
    """Per layer: (sliding, window) as transformers 4.57 configures the model."""
    L = cfg.num_hidden_layers
    types = getattr(cfg, "layer_types", None)
    sw = getattr(cfg, "sliding_window", None)
    if cfg.model_type == "mistral":
        return [(sw is not None, sw or 0)] * L
    if cfg.model_type in ("gemma2", "gemma3_text"):
        return [(t == "sliding_attention", sw if t == "sliding_attention" else 0) for t in types]
    if types is not None:
        assert all(t == "full_attention" for t in types), types
    return [(False, 0)] * L


def topk(logits_row):
    """logits_row: float32 tensor [V] -> dict(ids, probs, logits), best first (softmax in float64)."""
    lp = torch.log_softmax(logits_row.double(), 0)
    v, i = torch.topk(logits_row, TOP_K)
    return {"ids": [int(t) for t in i], "probs": r7list(torch.exp(lp[i]).numpy()), "logits": r7list(v.numpy())}


def softcap(model):
    return getattr(model.config, "final_logit_softcapping", None)


@torch.no_grad()
def lens_logits(model, h):
    """h: [D] residual -> float32 logits through the model's own epilogue."""
    x = model.model.norm(h[None, None, :])
    logits = model.lm_head(x)[0, 0].float()
    cap = softcap(model)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return logits


@torch.no_grad()
def run_forward(model, ids):
    """float32 eager forward; returns (logits [n,V], attentions list of [H,n,n], ins list of [n,D], outs)."""
    layers = model.model.layers
    ins, outs, hooks = [None] * len(layers), [None] * len(layers), []
    for l, layer in enumerate(layers):
        def pre(mod, args, kwargs, l=l):
            h = args[0] if args else kwargs["hidden_states"]
            ins[l] = h[0].detach().clone()

        def post(mod, args, kwargs, out, l=l):
            h = out[0] if isinstance(out, (tuple, list)) else out
            outs[l] = h[0].detach().clone()
        hooks.append(layer.register_forward_pre_hook(pre, with_kwargs=True))
        hooks.append(layer.register_forward_hook(post, with_kwargs=True))
    try:
        o = model(torch.tensor([ids], dtype=torch.long), output_attentions=True, use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    atts = [a[0].float() for a in o.attentions]
    return o.logits[0].float(), atts, ins, outs


def position_record(model, ids, p, wins, checks, full):
    logits, atts, ins, outs = run_forward(model, ids[:p + 1])
    n = p + 1
    L = len(atts)
    final = logits[p]
    rec = {"position": p, "token_id": int(ids[p]), "logits_top": topk(final), "layers": []}
    for l in range(L):
        a = atts[l][:, p, :]  # [H, n]
        assert a.shape[1] == n
        sums = a.double().sum(1)
        checks["max_row_sum_error"] = max(checks["max_row_sum_error"], float((sums - 1).abs().max()))
        assert float((sums - 1).abs().max()) < 1e-5, (l, p, sums)
        sliding, w = wins[l]
        nz = (a > 0).any(0).numpy()
        first = int(np.argmax(nz))
        visible = n - first
        assert nz[first:].all(), "zero weight inside the visible range"
        if sliding:
            # transformers: a query at p sees keys p-W+1 .. p (W positions)
            assert visible == min(n, w), (l, p, visible, w)
            assert float(a[:, :first].abs().max() if first else 0.0) == 0.0
            checks["sliding_rows"] += 1
            if n > w:
                checks["sliding_rows_truncated"] += 1
        else:
            assert first == 0
        if l + 1 < L:
            d = float((ins[l + 1][p] - outs[l][p]).abs().max())
            assert d == 0.0, ("residual_in[l+1] != residual_out[l]", l, d)
        lens = lens_logits(model, outs[l][p])
        lt = topk(lens)
        if l == L - 1:
            assert lt["ids"] == rec["logits_top"]["ids"], (lt, rec["logits_top"])
            dp = max(abs(x - y) for x, y in zip(lt["probs"], rec["logits_top"]["probs"]))
            assert dp <= 2e-6, dp
            checks["max_last_lens_vs_logits_dlogit"] = max(checks["max_last_lens_vs_logits_dlogit"],
                                                           float((lens - final).abs().max()))
        # causality: the same rows of a forward over the whole prompt
        fl, fa, fi, fo = full
        checks["max_truncated_vs_full_attention"] = max(checks["max_truncated_vs_full_attention"],
                                                        float((fa[l][:, p, :n] - a).abs().max()))
        scale = float(outs[l][p].abs().max())
        checks["max_truncated_vs_full_residual_rel"] = max(checks["max_truncated_vs_full_residual_rel"],
                                                          float((fo[l][p] - outs[l][p]).abs().max()) / scale)
        rec["layers"].append({"layer": l, "first_position": first, "attention": [r7list(row) for row in a.numpy()],
                              "residual_in": r7list(ins[l][p].numpy()), "residual_out": r7list(outs[l][p].numpy()),
                              "lens_top": lt})
    checks["max_truncated_vs_full_logit"] = max(checks["max_truncated_vs_full_logit"],
                                                float((full[0][p] - final).abs().max()))
    return rec, final


def make(name, cli, out_dir, work):
    if name in SHARED_MODELS:
        model, source, conv, unused, prompts = load_shared(name)
    else:
        model, source, conv, unused, prompts = load_synth(name, cli, work)
    cfg = model.config
    assert cfg._attn_implementation == "eager", cfg._attn_implementation
    rope_note = None
    if cfg.model_type == "phi3":
        force_long_rope(model)
        rope_note = ("LongRoPE long factors (and attention factor sqrt(1 + ln(max/orig)/ln(orig))) used for every "
                     "forward, as the engine does for a context above original_max_position_embeddings; "
                     "transformers alone would use the short factors for forwards of <= 32 tokens")
    wins = layer_windows(cfg)
    checks = {k: 0.0 for k in ("max_row_sum_error", "max_last_lens_vs_logits_dlogit", "max_truncated_vs_full_attention",
                               "max_truncated_vs_full_residual_rel", "max_truncated_vs_full_logit")}
    checks.update(sliding_rows=0, sliding_rows_truncated=0)
    out_prompts = []
    for pr in prompts:
        ids = pr["ids"]
        n = len(ids)
        full = run_forward(model, ids)
        positions = sorted({1, (n - 1) // 2, n - 1})
        recs = []
        for p in positions:
            rec, final = position_record(model, ids, p, wins, checks, full)
            if "ref" in pr:  # shared model: its own refs/*.json (every prompt position) and .last.f32
                want = pr["ref"]["positions"][p]["top_ids"][:TOP_K]
                assert rec["logits_top"]["ids"] == want, (name, pr["name"], p, rec["logits_top"]["ids"], want)
                if p == n - 1:
                    d = float(np.abs(final.numpy() - pr["ref_last"]).max())
                    checks.setdefault("max_abs_dlogit_vs_shared_last_f32", 0.0)
                    checks["max_abs_dlogit_vs_shared_last_f32"] = max(checks["max_abs_dlogit_vs_shared_last_f32"], d)
                    assert d < 1e-3, d
                    ref20 = [int(x) for x in np.argsort(-pr["ref_last"], kind="stable")[:20]]
                    assert [int(x) for x in torch.topk(final, 20).indices] == ref20
            if "arch_ref_top_ids" in pr and p == n - 1:
                got = [int(x) for x in torch.topk(final, 20).indices]
                assert got == pr["arch_ref_top_ids"], (name, got, pr["arch_ref_top_ids"])
            recs.append(rec)
        op = {"name": pr["name"], "ids": ids, "positions": recs}
        if "text" in pr:
            op = {"name": pr["name"], "text": pr["text"], "ids": ids, "positions": recs}
        out_prompts.append(op)
    versions = gbfix.versions()
    versions.pop("llama_cpp_commit", None)
    versions.pop("tokenizers", None)
    doc = {
        "schema": "glassbox-inside-ref-v1", "name": name, "architecture": cfg.model_type,
        "hf_class": type(model).__name__, "source": source,
        "num_layers": cfg.num_hidden_layers, "num_heads": cfg.num_attention_heads,
        "num_kv_heads": cfg.num_key_value_heads,
        "head_dim": getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads,
        "hidden_size": cfg.hidden_size, "vocab_size": cfg.vocab_size,
        "attn_logit_softcapping": getattr(cfg, "attn_logit_softcapping", None),
        "final_logit_softcapping": softcap(model),
        "layer_windows": [{"layer": l, "sliding": s, "window": w} for l, (s, w) in enumerate(wins)],
        "window_rule": "a sliding layer with window W lets the query at p see keys max(0, p-W+1) .. p "
                       "(W positions, checked on every row); window 0 = every earlier position",
        "top_k": TOP_K, "float_digits": DIGITS,
        "reference": f"float32 transformers {type(model).__name__}, attn_implementation=eager, output_attentions=True, "
                     "one forward over ids[0..position] per position; residuals from forward pre/post hooks on each "
                     "decoder layer (before the final norm); lens = lm_head(final_norm(residual_out)) with the final "
                     "logit soft-cap where the model has one; probabilities by softmax in float64 of the float32 logits",
        "tensor_conversion": conv, "unused_gguf_tensors": unused, "versions": versions,
        "checks": {k: (r7(v) if isinstance(v, float) else v) for k, v in checks.items()},
        "prompts": out_prompts,
    }
    if rope_note:
        doc["rope_note"] = rope_note
    out = os.path.join(out_dir, name + ".json")
    with open(out, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    print(name, type(model).__name__, "windows", sorted(set(wins)), "checks", doc["checks"],
          "bytes", os.path.getsize(out), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", default=os.path.join(REPO, "build", "headless", "app", "glassbox-cli"))
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "data", "inside"))
    ap.add_argument("names", nargs="*", default=ALL)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as work:
        for name in a.names:
            make(name, a.cli, a.out, work)


if __name__ == "__main__":
    main()
