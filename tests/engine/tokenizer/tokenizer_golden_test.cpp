// Golden prompt encodings and decodings from independent implementations
// (testdata/golden/README.md): run.c's encoder produced prompt_tokens for the
// stories260K cases (cross-checked by llama.cpp on stories260K.gguf), llama.cpp
// produced the llama-2-tiny-random prompt ids, and decoded_text is the UTF-8
// decode of prompt + generated ids. The same tok512 vocabulary reaches us three
// ways (tok512.bin, tok512.model, the vocabulary inside stories260K.gguf) and
// each must reproduce every case.
#include <filesystem>

#include "gb_test.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer_test_support.h"

namespace {

const char* const kStoriesCases[] = {"once_upon_a_time_n64", "once_upon_a_time_n256", "lily_cake_n256"};

// Checks prompt_tokens and decoded_text of every stories260K golden case.
void check_stories_goldens(const std::shared_ptr<const gb::Tokenizer>& tokenizer, const std::string& error) {
  QVERIFY2(tokenizer != nullptr, error.c_str());
  QCOMPARE(tokenizer->vocab_size(), 512);
  for (const char* name : kStoriesCases) {
    GB_REQUIRE_SHARED(path, std::string("testdata/golden/") + name + ".json");
    const nlohmann::json golden = gbtest::read_json(path);
    const std::string prompt = golden.at("prompt");
    const std::vector<gb::TokenId> want = gbtest::json_ids(golden.at("prompt_tokens"));
    const std::vector<gb::TokenId> got = tokenizer->encode(prompt, /*add_bos=*/true);
    QVERIFY2(got == want, (std::string(name) + " (" + std::string(tokenizer->kind()) + "): got " +
                           gbtest::ids_text(got) + " want " + gbtest::ids_text(want)).c_str());

    std::vector<gb::TokenId> all = want;
    const std::vector<gb::TokenId> generated = gbtest::json_ids(golden.at("generated_tokens"));
    all.insert(all.end(), generated.begin(), generated.end());
    const std::string decoded = tokenizer->decode(all);
    const std::string want_text = golden.at("decoded_text");
    QVERIFY2(decoded == want_text, (std::string(name) + " decode (" + std::string(tokenizer->kind()) + "):\n got " +
                                    gbtest::visible(decoded) + "\nwant " + gbtest::visible(want_text)).c_str());
  }
}

}  // namespace

GB_TEST(stories_goldens_with_tok512_bin) {
  GB_REQUIRE_SHARED(path, "models/stories260K/tok512.bin");
  std::string error;
  check_stories_goldens(gbtest::file_tokenizer(path, error), error);
}

GB_TEST(stories_goldens_with_tok512_model) {
  GB_REQUIRE_SHARED(path, "models/stories260K/tok512.model");
  std::string error;
  check_stories_goldens(gbtest::file_tokenizer(path, error), error);
}

GB_TEST(stories_goldens_with_gguf_vocabulary) {
  GB_REQUIRE_SHARED(path, "models/stories260K/stories260K.gguf");
  std::string error;
  check_stories_goldens(gbtest::gguf_tokenizer(path, error), error);
}

GB_TEST(stories_goldens_with_tok512_model_as_stored) {
  // spm_encode on the unmodified proto matched run.c for the single-space golden
  // prompts (models/README.md), so keeping the collapsing normalizer must too.
  GB_REQUIRE_SHARED(path, "models/stories260K/tok512.model");
  auto tok = gb::SentencePieceTokenizer::load(path, {.keep_model_normalizer = true});
  QVERIFY2(tok.ok(), tok.ok() ? "" : tok.error().message.c_str());
  check_stories_goldens(std::move(tok).value(), "");
}

GB_TEST(tok512_whitespace_runs_follow_run_c) {
  // run.c never collapses whitespace; tok512.model's normalizer would. With our
  // default (whitespace kept) the three tok512 forms agree on runs of spaces and
  // on leading/trailing spaces; the stored normalizer gives other ids.
  GB_REQUIRE_SHARED(bin_path, "models/stories260K/tok512.bin");
  GB_REQUIRE_SHARED(model_path, "models/stories260K/tok512.model");
  GB_REQUIRE_SHARED(gguf_path, "models/stories260K/stories260K.gguf");
  std::string error;
  const auto bin = gbtest::file_tokenizer(bin_path, error);
  QVERIFY2(bin != nullptr, error.c_str());
  const auto spm = gbtest::file_tokenizer(model_path, error);
  QVERIFY2(spm != nullptr, error.c_str());
  const auto gguf = gbtest::gguf_tokenizer(gguf_path, error);
  QVERIFY2(gguf != nullptr, error.c_str());
  auto stored = gb::SentencePieceTokenizer::load(model_path, {.keep_model_normalizer = true});
  QVERIFY(stored.ok());
  for (const std::string text : {"Once  upon   a time", "  Lily", "cake  ", " a\tb\n\nc  d "}) {
    const auto want = bin->encode(text, true);
    QVERIFY2(spm->encode(text, true) == want, ("sentencepiece vs run.c on '" + gbtest::visible(text) + "': " +
                                              gbtest::ids_text(spm->encode(text, true)) + " vs " + gbtest::ids_text(want)).c_str());
    QVERIFY2(gguf->encode(text, true) == want, ("gguf vs run.c on '" + gbtest::visible(text) + "'").c_str());
    QCOMPARE(bin->decode(want), text);
    QVERIFY2(stored.value()->encode(text, true) != want,
             ("the stored normalizer was expected to collapse '" + gbtest::visible(text) + "'").c_str());
  }
}

GB_TEST(llama_2_tiny_random_prompt_with_embedded_vocabulary) {
  GB_REQUIRE_SHARED(path, "models/llama-2-tiny-random/llama-2-tiny-random.gguf");
  GB_REQUIRE_SHARED(golden_path, "testdata/golden/llama-2-tiny-random_once_upon_a_time.json");
  std::string error;
  const auto tokenizer = gbtest::gguf_tokenizer(path, error);
  QVERIFY2(tokenizer != nullptr, error.c_str());
  QCOMPARE(tokenizer->vocab_size(), 32000);
  const nlohmann::json golden = gbtest::read_json(golden_path);
  const std::string prompt = golden.at("prompt");
  const std::vector<gb::TokenId> want = gbtest::json_ids(golden.at("prompt_tokens"));
  const std::vector<gb::TokenId> got = tokenizer->encode(prompt, /*add_bos=*/true);
  QVERIFY2(got == want, ("got " + gbtest::ids_text(got) + " want " + gbtest::ids_text(want)).c_str());
  QCOMPARE(tokenizer->decode(got), prompt);
  // The random model's generated ids are arbitrary vocabulary entries: decoding
  // them must agree with the SentencePiece library's view of the same vocabulary.
  GB_REQUIRE_SHARED(spm_path, "models/llama2-tokenizer/tokenizer.model");
  const auto spm = gbtest::file_tokenizer(spm_path, error);
  QVERIFY2(spm != nullptr, error.c_str());
  std::vector<gb::TokenId> all = want;
  const std::vector<gb::TokenId> generated = gbtest::json_ids(golden.at("generated_tokens"));
  all.insert(all.end(), generated.begin(), generated.end());
  QCOMPARE(tokenizer->decode(all), spm->decode(all));
}
