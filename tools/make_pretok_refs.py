#!/usr/bin/env python3
"""Make tests/data/pretok/gpt-4o.json: the reference splits of the `gpt-4o` pre-tokenizer row
(engine/tokenizer/pre_tokenizer.cpp) for tricky texts. Python tooling, run by hand, never by CI or tests.

The reference is Hugging Face `tokenizers` (Rust, Oniguruma regexes) configured as the pre_tokenizer of
openai/gpt-oss's tokenizer.json (o200k_harmony; llama.cpp writes tokenizer.ggml.pre = "gpt-4o" for it):

  Sequence[ Split(Regex(O200K), behavior="Isolated", invert=false),
            ByteLevel(add_prefix_space=false, trim_offsets=true, use_regex=false) ]

ByteLevel with use_regex=false only maps bytes to characters and splits nothing; each piece is mapped
back to its UTF-8 bytes (GPT-2's byte <-> character table) and checked against the text's offsets, so the
file holds plain-text pieces, as PreTokenizer::split returns them. Nothing of Glassbox is used.

O200K below is tiktoken's o200k_base pat_str, which o200k_harmony reuses (tiktoken_ext/openai_public.py),
and the "original regex from tokenizer.json" that llama.cpp's src/llama-vocab.cpp quotes for
LLAMA_VOCAB_PRE_TYPE_GPT4O. Optional cross-checks: --tiktoken FILE (openai_public.py, e.g. from
`pip download --no-deps tiktoken`) and --llama-cpp DIR compare the pattern with those sources; every
text is also split with the Python `regex` module (the engine of tiktoken's Python reference encoder),
and a disagreement with Oniguruma is reported (the HF split is what the file keeps).

Besides the hand-written texts, the 46 inputs of llama.cpp's tokenizer tests
(../shared/testdata/tokenizer/ggml-vocab-llama-bpe.gguf.inp) are included.

Usage:
  /work/venv-conv/bin/python tools/make_pretok_refs.py [--tiktoken openai_public.py] [--llama-cpp DIR]
tests/engine/tokenizer/pre_tokenizer_test.cpp compares PreTokenizer::create("gpt-4o") with the file.
"""
import argparse, json, os, re, sys

import regex
import tokenizers
from tokenizers import Regex, pre_tokenizers

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
OUT = os.path.join(REPO, "tests", "data", "pretok", "gpt-4o.json")
INP = os.path.join(REPO, "..", "shared", "testdata", "tokenizer", "ggml-vocab-llama-bpe.gguf.inp")
SEPARATOR = "\n__ggml_vocab_test__\n"

O200K = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])

# Each text aims at one part of the pattern (comments), in both letter alternatives where it matters.
TEXTS = [
    "DON'T I'll",                      # contractions after upper- and lower-case runs, any case of the suffix
    "you're We've she'D IT'S it's they'LL I'm o'clock",
    "rock'n'roll 'tis '' 's x's",      # ' not after letters; a suffix that is no contraction
    "it\u017f it'\u017f IT'\u017f",    # U+017F long s: case-folds to s under (?i:)
    "don\u2019t",                      # U+2019 is no apostrophe for the pattern
    "1234567 12 123 1234",             # \p{N}{1,3}: runs cut in threes from the left
    "3.14159 x1234y v2.0 1,000,000",
    "\u0661\u0662\u0663\u0664 \u00b2\u00b3\u2074\u2075 \u216b\u2160",  # Arabic-Indic digits, superscripts, Roman numerals (Nd, No, Nl)
    "\u4f60\u597d\u4e16\u754c\uff0c\u6211\u662f\u6a21\u578b\u3002",      # CJK (Lo) and fullwidth punctuation
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8 \uc548\ub155\ud558\uc138\uc694",
    "\U0001f44b\U0001f3fd hi \U0001f916\U0001f916 \U0001f468\u200d\U0001f469\u200d\U0001f467!",  # emoji, skin tone, ZWJ
    "\u00c9COLE \u00e9cole \u00c9cole",  # accented capitals
    "e\u0301cole E\u0301COLE \u00c5NGSTR\u00d6M",  # combining marks (M) inside letter runs
    "\u0391\u0398\u0397\u039d\u0391 \u0391\u03b8\u03ae\u03bd\u03b1 \u041c\u041e\u0421\u041a\u0412\u0410 \u041c\u043e\u0441\u043a\u0432\u0430",
    "\u01c5ungla \u02b0ello \u1f88\u1f00",  # titlecase Lt, modifier Lm
    "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e \u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35",  # Devanagari, Thai marks
    "HTTPServer iPhone McDonald's XMLHttpRequest camelCaseWord snake_case_word",
    "\r\n\n  ",                        # newline and space runs
    "a\r\n\n  b",
    "hello   ",                        # trailing spaces
    "   ",
    "\t\tx  \t y",
    "a\u00a0b \u3000c d\u2028e f\u0085g h\u200bi",  # NBSP, ideographic space, line separator, NEL, zero-width space
    "foo/bar\n//x",                    # [\r\n/]* after punctuation
    "path/to//file/ a// \n",
    "if (a && b) { return x->y; }\n",
    "def f(x):\n    return x**2\n\n\n",
    "!!!???... ...! --- ;)",           # punctuation runs
    "<|start|>assistant<|channel|>final<|message|>Hi<|end|>",
    "'''\"\"\" ``` ~~ $$ 100% #1 @user",
    "",
]


def byte_decoder():
    """GPT-2's character -> byte table (the inverse of ByteLevel's byte -> character map)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def check_sources(args):
    if args.tiktoken:
        src = open(args.tiktoken, encoding="utf-8").read()
        scope = {}
        body = src[src.index("def o200k_base"):src.index("def o200k_harmony")]
        join = body[body.index('pat_str = "|".join('):body.index("return")]
        exec(join, {}, scope)  # the pat_str assignment alone: a list of raw string literals joined by "|"
        if scope["pat_str"] != O200K:
            sys.exit("tiktoken's o200k_base pat_str differs:\n%s" % scope["pat_str"])
        if 'pat_str = base_enc["pat_str"]' not in src[src.index("def o200k_harmony"):]:
            sys.exit("tiktoken's o200k_harmony does not reuse o200k_base's pat_str")
        print("tiktoken o200k_base / o200k_harmony pat_str: identical")
    if args.llama_cpp:
        src = open(os.path.join(args.llama_cpp, "src", "llama-vocab.cpp"), encoding="utf-8").read()
        case = src[src.index("case LLAMA_VOCAB_PRE_TYPE_GPT4O:"):]
        line = re.search(r'// original regex from tokenizer.json\s*\n\s*// "(.*)",', case).group(1)
        quoted = json.loads('"' + line + '"')  # a C string literal without octal escapes reads as JSON
        if quoted != O200K:
            sys.exit("llama.cpp's quoted GPT4O regex differs:\n%s" % quoted)
        print("llama.cpp LLAMA_VOCAB_PRE_TYPE_GPT4O original regex: identical")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiktoken", help="tiktoken_ext/openai_public.py to compare the pattern with")
    ap.add_argument("--llama-cpp", help="a llama.cpp tree to compare the pattern with")
    args = ap.parse_args()
    check_sources(args)

    pre = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(O200K), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    to_byte = byte_decoder()
    alt = regex.compile(O200K)
    texts = list(TEXTS)
    with open(INP, encoding="utf-8", newline="") as f:
        llama_inputs = f.read().split(SEPARATOR)
    assert llama_inputs[-1] == "" and len(llama_inputs) == 47, len(llama_inputs)
    texts += [t for t in llama_inputs[:-1] if t not in texts]

    cases = []
    for text in texts:
        pieces = []
        for mapped, (begin, end) in pre.pre_tokenize_str(text):
            piece = bytes(to_byte[c] for c in mapped).decode("utf-8")
            assert piece == text[begin:end], (text, piece, begin, end)
            pieces.append(piece)
        assert "".join(pieces) == text, text
        other = [m.group(0) for m in alt.finditer(text)]
        if "".join(other) == text and other != pieces:
            print("python regex differs on %r:\n  onig  %r\n  regex %r" % (text, pieces, other))
        cases.append({"text": text, "pieces": pieces})

    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    head = {
        "schema": "glassbox-pretok-ref-v1",
        "row": "gpt-4o",
        "pattern": O200K,
        "reference": "tokenizers %s: Sequence[Split(Regex(pattern), Isolated), ByteLevel(use_regex=false)], "
                     "pieces mapped back to UTF-8" % tokenizers.__version__,
        "made_by": "tools/make_pretok_refs.py",
    }
    with open(OUT, "w", encoding="ascii", newline="\n") as f:
        f.write("{\n")
        for k, v in head.items():
            f.write("%s: %s,\n" % (json.dumps(k), json.dumps(v)))
        f.write('"cases": [\n')
        f.write(",\n".join(json.dumps(c, ensure_ascii=True) for c in cases))
        f.write("\n]}\n")
    print("%s: %d cases, %d bytes" % (os.path.relpath(OUT, REPO), len(cases), os.path.getsize(OUT)))


if __name__ == "__main__":
    main()
