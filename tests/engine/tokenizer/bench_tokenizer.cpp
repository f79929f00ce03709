// Tokenization speed on 1 MB of mixed text (English prose and Markdown from the
// shared READMEs, the 46 multilingual / emoji / code cases of the llama.cpp vectors,
// repeated) for the Llama-3 and Qwen2 byte-level BPE vocabularies and the Llama-2
// SPM one. Prints MB/s; asserts only that decoding gives the text back (no timed
// assertions: speed is reported, not tested). The same text is written to
// $GB_BENCH_TEXT_OUT when set, so other tokenizers (llama-tokenize) can be timed on it.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "gb_test.h"
#include "tokenizer_test_support.h"

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string mixed_text() {
  std::string seed;
  for (const char* rel : {"models/tiny-llama3/README.md", "testdata/tokenizer/README.md",
                          "testdata/tokenizer/ggml-vocab-llama-bpe.gguf.inp", "models/tiny-qwen2/README.md"})
    seed += slurp(gbtest::shared_file(rel));
  std::string text;
  while (text.size() < (size_t{1} << 20)) text += seed;
  text.resize(size_t{1} << 20);
  // Do not end inside a UTF-8 character.
  while (!text.empty() && (static_cast<unsigned char>(text.back()) & 0xC0) == 0x80) text.pop_back();
  if (!text.empty() && static_cast<unsigned char>(text.back()) >= 0xC0) text.pop_back();
  return text;
}

void bench(const std::string& vocab_rel, const std::string& label) {
  GB_REQUIRE_SHARED(path, vocab_rel);
  std::string error;
  const auto tok = gbtest::gguf_tokenizer(path, error);
  QVERIFY2(tok != nullptr, error.c_str());
  const std::string text = mixed_text();
  if (const char* out = std::getenv("GB_BENCH_TEXT_OUT")) std::ofstream(out, std::ios::binary) << text;
  std::vector<gb::TokenId> ids;
  double best_s = 1e9;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    ids = tok->encode(text, false);
    const auto t1 = std::chrono::steady_clock::now();
    best_s = std::min(best_s, std::chrono::duration<double>(t1 - t0).count());
  }
  QCOMPARE(tok->decode(ids), text);
  const double mb = static_cast<double>(text.size()) / 1e6;
  std::printf("%s: %zu bytes -> %zu tokens, best of 3: %.3f s = %.2f MB/s (%.0f tokens/s)\n", label.c_str(),
              text.size(), ids.size(), best_s, mb / best_s, static_cast<double>(ids.size()) / best_s);
}

}  // namespace

GB_TEST(llama3_bpe_speed) { bench("models/tiny-llama3/tiny-llama3-F16.gguf", "llama-bpe (Llama 3)"); }
GB_TEST(qwen2_bpe_speed) { bench("models/tiny-qwen2/tiny-qwen2-F16.gguf", "qwen2"); }
GB_TEST(llama2_spm_speed) { bench("testdata/tokenizer/ggml-vocab-llama-spm.gguf", "llama-spm (Llama 2)"); }
