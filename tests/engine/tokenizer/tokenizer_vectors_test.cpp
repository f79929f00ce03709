// llama.cpp's tokenizer test vectors (testdata/tokenizer/ggml-vocab-*.gguf.inp/.out,
// 46 cases each, ids without BOS) for the Llama 2 SentencePiece vocabulary and
// the byte-level BPE ones (Llama 3 and Qwen2 through the vocabularies inside the
// tiny-llama3 / tiny-qwen2 models, GPT-2, DeepSeek, Falcon, MPT, Refact,
// StarCoder through their vocab files). The .out file was produced upstream from the reference tokenizer and
// checked with llama.cpp's test-tokenizer-0 (testdata/tokenizer/README.md), so it
// is independent of our code. The same vocabulary exists as a SentencePiece
// proto (tokenizer.model) and in llama2.c form (tokenizer.bin); each of our three
// tokenizers must reproduce every case.
#include <cstdio>

#include "gb_test.h"
#include "core/utf8.h"
#include "tokenizer/vocab_test_vectors.h"
#include "tokenizer_test_support.h"

namespace {

// Runs every case through `tokenizer`; returns the number that match and fills
// `report` with the first mismatches.
int count_matching(const gb::Tokenizer& tokenizer, const std::vector<std::string>& inputs,
                   const std::vector<std::vector<gb::TokenId>>& expected, std::string& report) {
  int num_matching = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<gb::TokenId> got = tokenizer.encode(inputs[i], /*add_bos=*/false);
    if (got == expected[i]) {
      ++num_matching;
    } else if (report.size() < 2000) {
      report += "\n  case " + std::to_string(i) + " '" + gbtest::visible(inputs[i]) + "': got " +
                gbtest::ids_text(got) + " want " + gbtest::ids_text(expected[i]);
    }
  }
  return num_matching;
}

void check_all_vectors(const std::shared_ptr<const gb::Tokenizer>& tokenizer, const std::string& error,
                       const std::string& name = "llama-spm") {
  QVERIFY2(tokenizer != nullptr, error.c_str());
  GB_REQUIRE_SHARED(inp, "testdata/tokenizer/ggml-vocab-" + name + ".gguf.inp");
  GB_REQUIRE_SHARED(out, "testdata/tokenizer/ggml-vocab-" + name + ".gguf.out");
  auto inputs = gb::read_vocab_test_inputs(inp);
  QVERIFY2(inputs.ok(), inputs.ok() ? "" : inputs.error().message.c_str());
  auto expected = gb::read_vocab_test_outputs(out);
  QVERIFY2(expected.ok(), expected.ok() ? "" : expected.error().message.c_str());
  QCOMPARE(inputs->size(), size_t{46});
  QCOMPARE(expected->size(), inputs->size());
  std::string report;
  const int num_matching = count_matching(*tokenizer, inputs.value(), expected.value(), report);
  std::printf("%s vectors with %s: %d/%zu\n", name.c_str(), std::string(tokenizer->kind()).c_str(), num_matching,
              inputs->size());
  QVERIFY2(num_matching == static_cast<int>(inputs->size()),
           (std::to_string(num_matching) + "/46 match:" + report).c_str());
}

}  // namespace

GB_TEST(vectors_file_format_parses_edge_cases) {
  // Empty case, a case that is only a newline, and one with embedded newlines.
  const std::string text = std::string("a") + std::string(gb::kVocabTestSeparator) + std::string(gb::kVocabTestSeparator) +
                           "\n" + std::string(gb::kVocabTestSeparator) + "x\ny" + std::string(gb::kVocabTestSeparator);
  auto cases = gb::parse_vocab_test_inputs(text, "mem");
  QVERIFY(cases.ok());
  QCOMPARE(cases->size(), size_t{4});
  QCOMPARE((*cases)[0], std::string("a"));
  QCOMPARE((*cases)[1], std::string(""));
  QCOMPARE((*cases)[2], std::string("\n"));
  QCOMPARE((*cases)[3], std::string("x\ny"));
  QVERIFY(!gb::parse_vocab_test_inputs("no separator", "mem").ok());
  const std::vector<gb::TokenId> ids = {29871, 13};
  QCOMPARE(gb::format_vocab_test_line(ids), std::string(" 29871 13"));
  QCOMPARE(gb::format_vocab_test_line({}), std::string(""));
}

GB_TEST(llama_spm_vectors_with_gguf_vocabulary) {
  GB_REQUIRE_SHARED(path, "testdata/tokenizer/ggml-vocab-llama-spm.gguf");
  std::string error;
  check_all_vectors(gbtest::gguf_tokenizer(path, error), error);
}

GB_TEST(llama_spm_vectors_with_sentencepiece_model) {
  GB_REQUIRE_SHARED(path, "models/llama2-tokenizer/tokenizer.model");
  std::string error;
  check_all_vectors(gbtest::file_tokenizer(path, error), error);
}

GB_TEST(llama_spm_vectors_with_llama2c_bin) {
  GB_REQUIRE_SHARED(path, "models/llama2-tokenizer/tokenizer.bin");
  std::string error;
  check_all_vectors(gbtest::file_tokenizer(path, error), error);
}

// Decoding is byte-exact (decode(encode(text)) == text), the vector ids survive
// decode then encode, and streaming the ids gives whole UTF-8 characters only,
// adding up to the text.
void check_round_trips(const gb::Tokenizer& tokenizer, const std::string& name) {
  const std::string inp = gbtest::shared_file("testdata/tokenizer/ggml-vocab-" + name + ".gguf.inp");
  const std::string out = gbtest::shared_file("testdata/tokenizer/ggml-vocab-" + name + ".gguf.out");
  auto inputs = gb::read_vocab_test_inputs(inp);
  auto expected = gb::read_vocab_test_outputs(out);
  QVERIFY(inputs.ok() && expected.ok());
  for (size_t i = 0; i < inputs->size(); ++i) {
    const std::string& text = (*inputs)[i];
    const std::vector<gb::TokenId>& ids = (*expected)[i];
    QCOMPARE(tokenizer.decode(tokenizer.encode(text, false)), text);
    QCOMPARE(tokenizer.encode(tokenizer.decode(ids), false), ids);
    gb::StreamingDecoder stream(tokenizer);
    std::string streamed;
    for (const gb::TokenId id : ids) {
      const std::string piece = stream.push(id);
      QCOMPARE(gb::utf8_sanitize(piece), piece);  // never half a character
      streamed += piece;
    }
    streamed += stream.flush();
    QCOMPARE(streamed, text);
  }
}

// Byte-level BPE: the vocabulary named by a model or vocab file, and its vectors.
void check_bpe_vectors(const std::string& vocab_file, const std::string& name) {
  GB_REQUIRE_SHARED(path, vocab_file);
  std::string error;
  const auto tokenizer = gbtest::gguf_tokenizer(path, error);
  QVERIFY2(tokenizer != nullptr, error.c_str());
  QCOMPARE(std::string(tokenizer->kind()), std::string("gguf-bpe"));
  check_all_vectors(tokenizer, error, name);
  check_round_trips(*tokenizer, name);
}

GB_TEST(llama_bpe_vectors_with_tiny_llama3_vocabulary) {
  check_bpe_vectors("models/tiny-llama3/tiny-llama3-F16.gguf", "llama-bpe");
}
GB_TEST(qwen2_vectors_with_tiny_qwen2_vocabulary) {
  check_bpe_vectors("models/tiny-qwen2/tiny-qwen2-F16.gguf", "qwen2");
}
GB_TEST(gpt2_vectors) { check_bpe_vectors("testdata/tokenizer/ggml-vocab-gpt-2.gguf", "gpt-2"); }
GB_TEST(deepseek_llm_vectors) {
  check_bpe_vectors("testdata/tokenizer/ggml-vocab-deepseek-llm.gguf", "deepseek-llm");
}
GB_TEST(falcon_vectors) { check_bpe_vectors("testdata/tokenizer/ggml-vocab-falcon.gguf", "falcon"); }
GB_TEST(mpt_vectors) { check_bpe_vectors("testdata/tokenizer/ggml-vocab-mpt.gguf", "mpt"); }
GB_TEST(refact_vectors) { check_bpe_vectors("testdata/tokenizer/ggml-vocab-refact.gguf", "refact"); }
GB_TEST(starcoder_vectors) { check_bpe_vectors("testdata/tokenizer/ggml-vocab-starcoder.gguf", "starcoder"); }
