#!/usr/bin/env python3
"""Make tests/data/converted: tiny GGUFs written by llama.cpp's own converter, with references from
Hugging Face transformers run on the original checkpoints (Python tooling, never run by CI or tests).

tests/data/arch holds references for files that Glassbox synthesizes itself (`glassbox-cli synth`): an
independent forward pass, but the file follows Glassbox's reading of the converter. This script closes
that gap for qwen3, gemma2, gemma3 and phi3 (mistral is written by the converter as `llama`, which the
stories goldens and tiny-llama3 already cover):

1. a small SentencePiece vocabulary (byte fallback) is trained on the GPL-3 text, so the files stay small;
2. per architecture, a tiny transformers model is built from a config and a fixed seed; every weight is
   rounded to float16, so the converter's `--outtype f16` is lossless (norms stay float32 in the file);
3. the checkpoint (safetensors + tokenizer.model + tokenizer_config.json) goes through llama.cpp's
   `convert_hf_to_gguf.py --outtype f16`, unchanged; the file is written to tests/data/converted/<arch>.gguf;
4. the reference is the same float32 transformers model (eager attention) on the original checkpoint:
   prompt ids, 16 greedy tokens and the top-20 logits of every greedy step, in tests/data/converted/<arch>.json
   (schema glassbox-arch-ref-v1, as tests/data/arch). Nothing is read back from the GGUF to make it.

tests/engine/runtime/test_arch_converted_refs.cpp runs each file through the Engine and compares.

Usage (the converter from the llama.cpp tree vendored in llama_cpp_python's sdist, a PyPI package):
  python3 -m venv /work/venv-conv
  /work/venv-conv/bin/pip install torch numpy "transformers>=4.57,<5" safetensors sentencepiece protobuf
  pip download --no-deps --no-binary :all: llama_cpp_python==0.3.36 && tar xzf llama_cpp_python-0.3.36.tar.gz
  /work/venv-conv/bin/pip install ./llama_cpp_python-0.3.36/vendor/llama.cpp/gguf-py
  /work/venv-conv/bin/python tools/make_converted_refs.py \
      --llama-cpp llama_cpp_python-0.3.36/vendor/llama.cpp [ARCH ...]
"""
import argparse, hashlib, json, os, subprocess, sys, tempfile

import numpy as np
import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
N_GEN = 16
TOPK = 20
VOCAB = 512
SPECIAL = (0, 1, 2)  # <unk>, <s>, </s> of the trained vocabulary: greedy paths must avoid them
MIN_MARGIN = 0.02  # the smallest top-1 / top-2 logit gap of a greedy step (the test's tolerance is 1e-3)

# name -> (first seed, prompt lengths). Prompts are random ids >= 3 drawn from the seed. Lengths exceed
# the sliding windows (6); phi3's exceed its original context (32), so both sides use the long factors.
ARCHS = {
    "qwen3": (4101, [5, 13, 21]),
    "gemma2": (4102, [5, 13, 21]),
    "gemma3": (4103, [5, 13, 21]),
    "phi3": (4104, [33, 40]),
    "qwen3moe": (4111, [5, 13, 21]),
    "mixtral": (4112, [5, 13, 21]),
    "gpt-oss": (4113, [5, 13, 40]),
}
BPE_ARCHS = {"qwen3moe", "gpt-oss"}  # the converter reads a byte-level BPE vocabulary for these, SentencePiece for the rest
MIN_ROUTER_MARGIN = 1e-3  # the smallest gap between the k-th and (k+1)-th router logit of any token and layer


def config(arch):
    common = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_attention_heads=4,
                  max_position_embeddings=256, rms_norm_eps=1e-6, bos_token_id=1, eos_token_id=2,
                  pad_token_id=0, attn_implementation="eager")
    if arch == "qwen3":
        # Untied output, grouped queries (4 heads over 2 KV heads), per-head q/k norms, a head size
        # that is not hidden / heads (attention.key_length).
        return transformers.Qwen3ForCausalLM, transformers.Qwen3Config(
            num_hidden_layers=2, num_key_value_heads=2, head_dim=16, rope_theta=1e6, attention_bias=False,
            tie_word_embeddings=False, **common)
    if arch == "gemma2":
        # Layers 0 and 2 slide over 6 tokens, layer 1 is global; both soft caps; query scale 1/sqrt(head_dim)
        # (query_pre_attn_scalar = head_dim, llama.cpp's rule below 27B).
        return transformers.Gemma2ForCausalLM, transformers.Gemma2Config(
            num_hidden_layers=3, num_key_value_heads=2, head_dim=16, rope_theta=10000.0, sliding_window=6,
            query_pre_attn_scalar=16, attn_logit_softcapping=50.0, final_logit_softcapping=30.0,
            hidden_activation="gelu_pytorch_tanh", tie_word_embeddings=True, **common)
    if arch == "gemma3":
        # Six layers: five slide over 6 tokens (local RoPE base 10000), the sixth is global (base 1e6,
        # linear RoPE scaling 8 as in Gemma 3 4B and larger); one KV head.
        return transformers.Gemma3ForCausalLM, transformers.Gemma3TextConfig(
            num_hidden_layers=6, num_key_value_heads=1, head_dim=16, rope_theta=1e6, rope_local_base_freq=10000.0,
            rope_scaling={"rope_type": "linear", "factor": 8.0}, sliding_window=6, query_pre_attn_scalar=16,
            final_logit_softcapping=None, attn_logit_softcapping=None, hidden_activation="gelu_pytorch_tanh",
            tie_word_embeddings=True, **common)
    if arch == "phi3":
        # Fused qkv and gate_up projections, LongRoPE (original context 32, long factors past it).
        g = np.random.default_rng(7)
        long_f = [float("%.4g" % x) for x in 1.0 + 4.0 * g.random(4)]  # head size 8: 4 rotated pairs
        short_f = [float("%.4g" % x) for x in 1.0 + 0.5 * g.random(4)]
        common["max_position_embeddings"] = 256
        return transformers.Phi3ForCausalLM, transformers.Phi3Config(
            num_hidden_layers=2, num_key_value_heads=4, rope_theta=10000.0, original_max_position_embeddings=32,
            rope_scaling={"type": "longrope", "long_factor": long_f, "short_factor": short_f}, sliding_window=None,
            tie_word_embeddings=False, **common)
    if arch == "qwen3moe":
        # Every layer a mixture: 8 experts of width 32, 2 per token, top-k weights renormalized (llama.cpp always
        # renormalizes for qwen3moe; Qwen3-30B-A3B's config says norm_topk_prob), q/k norms as qwen3.
        return transformers.Qwen3MoeForCausalLM, transformers.Qwen3MoeConfig(
            num_hidden_layers=2, num_key_value_heads=2, head_dim=16, rope_theta=1e6, attention_bias=False,
            num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32, norm_topk_prob=True,
            decoder_sparse_step=1, mlp_only_layers=[], tie_word_embeddings=False, **common)
    if arch == "mixtral":
        # Mixtral: written by the converter as `llama` with expert_count; 4 experts of width 48, top-2 with the
        # softmax over the chosen two; q/k rows permuted by the converter (llama).
        common["intermediate_size"] = 48
        return transformers.MixtralForCausalLM, transformers.MixtralConfig(
            num_hidden_layers=2, num_key_value_heads=2, head_dim=8, rope_theta=1e6, num_local_experts=4,
            num_experts_per_tok=2, sliding_window=None, tie_word_embeddings=False, **common)
    if arch == "gpt-oss":
        # gpt-oss: 4 layers alternating a 6-token sliding window (even layers) and full attention, a learned
        # sink per head, q/k/v/o biases, 8 experts of width 32 with biases, 2 per token (top-k of the router's
        # logits, then softmax over those), the clamped SwiGLU, YaRN x4 over an original context of 16 (not
        # truncated, as gpt-oss's own config says); the 40-token prompt runs well past the original context.
        return transformers.GptOssForCausalLM, transformers.GptOssConfig(
            num_hidden_layers=4, num_key_value_heads=2, head_dim=16, rope_theta=150000.0, sliding_window=6,
            num_local_experts=8, num_experts_per_tok=2, tie_word_embeddings=False,
            rope_scaling={"rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0, "beta_slow": 1.0,
                          "truncate": False, "original_max_position_embeddings": 16},
            **{**common, "intermediate_size": 32})
    raise SystemExit("unknown arch " + arch)


def routing(model, seq, k):
    """For a mixture: the k experts each position of `seq` goes to in every layer (best first), and the smallest
    gap between the k-th and (k+1)-th router logit."""
    if model.config.model_type == "gpt_oss":
        # gpt-oss's router hands on only the chosen experts' softmax; its logits come from its input.
        captured = []
        hooks = [layer.mlp.router.register_forward_hook(
            lambda mod, args, out: captured.append(torch.nn.functional.linear(
                args[0].reshape(-1, mod.hidden_dim), mod.weight, mod.bias)))
            for layer in model.model.layers]
        with torch.no_grad():
            model(torch.tensor([seq], dtype=torch.long))
        for h in hooks:
            h.remove()
        router_logits = captured
    else:
        with torch.no_grad():
            router_logits = model(torch.tensor([seq], dtype=torch.long), output_router_logits=True).router_logits
    layers, margin = [], float("inf")
    for r in router_logits:  # (positions, experts) per layer
        r = r.double()
        top = torch.topk(r, k + 1, dim=-1)
        layers.append([[int(e) for e in row[:k]] for row in top.indices.tolist()])
        margin = min(margin, float((top.values[:, k - 1] - top.values[:, k]).min()))
    return layers, margin


def train_vocab(work):
    """A 512-piece SentencePiece BPE vocabulary with byte fallback, trained on the GPL-3 text."""
    import sentencepiece as spm
    prefix = os.path.join(work, "spm")
    spm.SentencePieceTrainer.train(
        input="/usr/share/common-licenses/GPL-3", model_prefix=prefix, vocab_size=VOCAB, model_type="bpe",
        byte_fallback=True, character_coverage=1.0, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        num_threads=2, minloglevel=2)
    return prefix + ".model"


def train_bpe_vocab(work):
    """A 512-token byte-level BPE vocabulary (GPT-2's pre-tokenizer; <unk> 0, <s> 1, </s> 2, the 256 byte
    symbols, then merges) trained on the GPL-3 text, saved as a transformers tokenizer directory."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train(["/usr/share/common-licenses/GPL-3"], trainer)
    assert tok.get_vocab_size() == VOCAB and tok.token_to_id("</s>") == 2
    out = os.path.join(work, "bpe")
    transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                         unk_token="<unk>").save_pretrained(out)
    return out


# The converter names a byte-level BPE vocabulary's pre-tokenizer by hashing the ids it gives a fixed text, and
# knows only published vocabularies; for the trained one it is told the name (GPT-2's, which the trained
# vocabulary uses). Everything else is the converter's own code.
CONVERT_BPE = """
import sys
sys.path.insert(0, sys.argv.pop(1))
import convert_hf_to_gguf
from conversion import base
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "gpt-2"
convert_hf_to_gguf.main()
"""


def randomize(model, arch, seed):
    """Every weight random and exactly representable in float16 (the converter's f16 output is then
    lossless); norms near their neutral value (Gemma stores 1 + w, so w near 0)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "sinks" in name:  # gpt-oss: sink logits around the scores' own scale
                p.copy_(1.5 * torch.randn(p.shape, generator=g))
            elif "bias" in name:
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
            elif p.dim() == 1:
                base = 0.0 if arch.startswith("gemma") else 1.0
                p.copy_(base + 0.2 * torch.randn(p.shape, generator=g))
            else:
                # Unit-scale activations; a wider output head, so greedy margins stay well above the
                # test's 1e-3 tolerance.
                fan_in = p.shape[1] if "embed" not in name else 8.0
                gain = 4.0 if "lm_head" in name else 1.5
                p.copy_(torch.randn(p.shape, generator=g) * (gain / fan_in ** 0.5))
            p.copy_(p.half().float())


def save_checkpoint(model, arch, vocab, out_dir):
    model.save_pretrained(out_dir, safe_serialization=True)
    import shutil
    if arch in BPE_ARCHS:
        for f in os.listdir(vocab["bpe"]):
            shutil.copy(os.path.join(vocab["bpe"], f), out_dir)
        return
    shutil.copy(vocab["spm"], os.path.join(out_dir, "tokenizer.model"))
    cls = "GemmaTokenizer" if arch.startswith("gemma") else "LlamaTokenizer"
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": cls, "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
                   "add_bos_token": True, "add_eos_token": False, "model_max_length": 256}, f, indent=1)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def forward(model, ids, n_gen):
    """Greedy with a full recompute per step (no KV cache): the logits that chose each token."""
    seq, gen, rows = list(ids), [], []
    with torch.no_grad():
        for _ in range(n_gen):
            row = model(torch.tensor([seq], dtype=torch.long)).logits[0, -1].double()
            rows.append(row)
            t = int(torch.argmax(row))
            gen.append(t)
            seq.append(t)
    return gen, rows


def step_record(row):
    top = torch.topk(row, TOPK)
    logits = [float("%.7g" % x) for x in top.values.tolist()]
    return {"top_ids": [int(i) for i in top.indices.tolist()], "top_logits": logits, "margin": logits[0] - logits[1]}


def llama_cpp_version(tree):
    """The llama.cpp tree's identity: the sdist's version file, else the path."""
    for rel in ("../../llama_cpp/__init__.py",):
        p = os.path.join(tree, rel)
        if os.path.exists(p):
            for line in open(p):
                if line.startswith("__version__"):
                    return "llama_cpp_python " + line.split("=")[1].strip().strip('"') + " vendor/llama.cpp"
    return tree


def references(model, seed, lengths):
    """Prompts of random ids >= 3 from `seed` and their greedy records, or None when a greedy path reaches a
    special token (the engine stops at end tokens) or a step's margin is under MIN_MARGIN."""
    g = np.random.default_rng(seed)
    prompts = []
    for i, n in enumerate(lengths):
        ids = [int(x) for x in g.integers(3, VOCAB, n)]
        gen, rows = forward(model, ids, N_GEN)
        steps = [step_record(r) for r in rows]
        margin = min(s["margin"] for s in steps)
        if any(t in SPECIAL for t in gen) or margin < MIN_MARGIN:
            return None
        record = {"name": "p%d" % i, "ids": ids, "greedy": {"ids": gen, "steps": steps}, "min_greedy_margin": margin}
        if hasattr(model.config, "num_experts_per_tok"):
            # Routing of every position the model ran: the prompt and the greedy tokens but the last.
            k = model.config.num_experts_per_tok
            experts, router_margin = routing(model, ids + gen[:-1], k)
            if router_margin < MIN_ROUTER_MARGIN:
                return None
            record["routing"] = {"experts_per_token": k, "layers": experts, "min_router_margin": router_margin}
        prompts.append(record)
    return prompts


def make(arch, vocab, tree, out_dir, work):
    first_seed, lengths = ARCHS[arch]
    cls, cfg = config(arch)
    for seed in range(first_seed, first_seed + 100):  # the first seed whose greedy paths are clear
        torch.manual_seed(seed)
        model = cls(cfg).float().eval()
        randomize(model, arch, seed)
        prompts = references(model, seed, lengths)
        if prompts is not None:
            break
    else:
        raise SystemExit(f"{arch}: no seed in 100 gives clear greedy paths")
    ckpt = os.path.join(work, arch)
    save_checkpoint(model, arch, vocab, ckpt)
    gguf_path = os.path.join(out_dir, arch + ".gguf")
    convert = ["-c", CONVERT_BPE, tree] if arch in BPE_ARCHS else [os.path.join(tree, "convert_hf_to_gguf.py")]
    subprocess.run([sys.executable, *convert, ckpt, "--outtype", "f16",
                    "--outfile", gguf_path], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE if not os.environ.get("GB_VERBOSE") else None)
    architecture = "llama" if arch == "mixtral" else arch
    doc = {"schema": "glassbox-arch-ref-v1", "arch": arch, "architecture": architecture, "file": arch + ".gguf",
           "model_sha256": sha256(gguf_path), "seed": seed, "context_length": 256, "top_k": TOPK, "n_gen": N_GEN,
           "converter": llama_cpp_version(tree) + " convert_hf_to_gguf.py --outtype f16",
           "reference": f"float32 transformers {cls.__name__} (eager attention) on the original checkpoint "
                        "(weights float16-exact), before conversion",
           "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                        "numpy": np.__version__},
           "prompts": prompts}
    with open(os.path.join(out_dir, arch + ".json"), "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    print(arch, cls.__name__, "seed", seed, "min margin %.3g" % min(p["min_greedy_margin"] for p in prompts),
          "gguf bytes", os.path.getsize(gguf_path))


# Quantized files: (converted arch, llama-quantize file type). The bar a quantized file is held to is llama.cpp's
# own error on it: llama.cpp (its CPU kernels, through llama-cpp-python's bindings of the same tree's libllama,
# F32 KV) runs each prompt on the quantized file and on a float32 copy of it (every tensor dequantized by
# gguf-py), and the JSON keeps both first-step top-20s. The test runs Glassbox the same two ways (its own float
# copy, made in the test) and holds its quantization error to llama.cpp's, and its float32 logits to llama.cpp's.
QUANTIZED = {"gpt-oss": "MXFP4_MOE"}


def llama_cpp_first_step(lib_dir, sdist, path, ids):
    """llama.cpp's logits after `ids` on `path` (KV cache F32)."""
    sys.path.insert(0, sdist)
    os.environ["LLAMA_CPP_LIB_PATH"] = lib_dir
    import llama_cpp
    m = llama_cpp.Llama(model_path=path, n_ctx=256, logits_all=True, verbose=False, n_threads=1,
                        type_k=llama_cpp.GGML_TYPE_F32, type_v=llama_cpp.GGML_TYPE_F32)
    m.eval(ids)
    return torch.tensor(np.array(m.scores[m.n_tokens - 1]), dtype=torch.float64)


def dequantized_copy(tree, src, dst):
    """`src` with every tensor dequantized to float32 by gguf-py, the metadata unchanged but the file type."""
    sys.path.insert(0, os.path.join(tree, "gguf-py"))
    import gguf
    r = gguf.GGUFReader(src)
    w = gguf.GGUFWriter(dst, r.fields["general.architecture"].contents())
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if name == "general.file_type":
            w.add_uint32(name, 0)
        elif f.types[0] == gguf.GGUFValueType.ARRAY:
            w.add_key_value(name, f.contents(), f.types[0], sub_type=f.types[-1])
        else:
            w.add_key_value(name, f.contents(), f.types[0])
    for t in r.tensors:
        data = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        w.add_tensor(t.name, data.reshape([int(x) for x in reversed(t.shape.tolist())]))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def make_quantized(arch, ftype, tree, build, out_dir, work):
    src = os.path.join(out_dir, arch + ".gguf")
    name = arch + "-" + ftype.lower()
    path = os.path.join(out_dir, name + ".gguf")
    subprocess.run([os.path.join(build, "bin", "llama-quantize"), src, path, ftype], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    floats = os.path.join(work, name + "-f32.gguf")
    dequantized_copy(tree, path, floats)
    ref = json.load(open(os.path.join(out_dir, arch + ".json")))
    sdist = os.path.abspath(os.path.join(tree, "..", ".."))
    lib = os.path.join(build, "bin")
    prompts, worst = [], 0.0
    for p in ref["prompts"]:
        f32 = llama_cpp_first_step(lib, sdist, floats, p["ids"])
        quant = llama_cpp_first_step(lib, sdist, path, p["ids"])
        top = torch.topk(f32, TOPK).indices
        worst = max(worst, float((quant[top] - f32[top]).abs().max()))
        prompts.append({"name": p["name"], "ids": p["ids"], "llama_cpp_f32": step_record(f32),
                        "llama_cpp_quantized": step_record(quant)})
    doc = {"schema": "glassbox-quantized-ref-v1", "arch": arch, "file": name + ".gguf",
           "model_sha256": sha256(path), "context_length": ref["context_length"], "top_k": TOPK,
           "quantized": ftype, "made_from": arch + ".gguf, llama-quantize " + ftype,
           "reference": "llama.cpp (" + llama_cpp_version(tree) + ", CPU, F32 KV) on the quantized file and on its "
                        "float32 copy dequantized by gguf-py; first step of each prompt",
           "llama_cpp_quantization_error": worst, "prompts": prompts}
    with open(os.path.join(out_dir, name + ".json"), "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    print(name, "llama.cpp's max |d logit|, quantized against its float32 copy: %.3g" % worst,
          "gguf bytes", os.path.getsize(path))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-cpp", required=True, help="a llama.cpp source tree (convert_hf_to_gguf.py)")
    ap.add_argument("--llama-cpp-build", help="its CPU build (bin/llama-quantize, bin/libllama.so): also make "
                                              "the quantized files of QUANTIZED")
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "data", "converted"))
    ap.add_argument("--quantized-only", action="store_true", help="only the quantized files, from the committed ones")
    ap.add_argument("archs", nargs="*", default=list(ARCHS))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    tree = os.path.abspath(a.llama_cpp)
    if not a.quantized_only:
        with tempfile.TemporaryDirectory() as work:
            vocab = {"spm": train_vocab(work), "bpe": train_bpe_vocab(work)}
            for arch in a.archs:
                make(arch, vocab, tree, a.out, work)
    if a.llama_cpp_build:
        with tempfile.TemporaryDirectory() as work:
            for arch in a.archs:
                if arch in QUANTIZED:
                    make_quantized(arch, QUANTIZED[arch], tree, os.path.abspath(a.llama_cpp_build), a.out, work)


if __name__ == "__main__":
    main()
