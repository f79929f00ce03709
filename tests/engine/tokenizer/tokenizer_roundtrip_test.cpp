// Property tests over the shared vocabularies. Each vocabulary exists in three
// forms; libsentencepiece reading the .model file is an independent reference
// for our own llama2.c and GGUF encoders. For seeded random UTF-8 strings
// (ASCII, whitespace runs, \n, \t, Latin, Cyrillic, CJK, emoji, any scalar
// value) every form must give the same ids and decode(encode(s)) must equal s.
// For random id sequences, streaming output must equal the sanitized decode.
// Also load_tokenizer's choice of tokenizer and its vocab-size check.
#include <filesystem>
#include <random>

#include "gb_test.h"
#include "model/model.h"
#include "core/utf8.h"
#include "tokenizer_test_support.h"

namespace {

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// A random valid UTF-8 string of 0..40 characters. U+0000 and U+2581 (the
// SentencePiece space mark, which decodes to ' ') are left out: no SentencePiece
// tokenizer can round-trip them.
std::string random_text(std::mt19937& rng) {
  auto pick = [&](uint32_t lo, uint32_t hi) { return std::uniform_int_distribution<uint32_t>(lo, hi)(rng); };
  std::string s;
  const uint32_t num_chars = pick(0, 40);
  for (uint32_t i = 0; i < num_chars; ++i) {
    uint32_t cp = 0;
    switch (pick(0, 10)) {
      case 0: case 1: case 2: cp = pick(0x21, 0x7E); break;                            // printable ASCII
      case 3: s.append(pick(1, 4), ' '); continue;                                      // space runs
      case 4: cp = pick(0, 2) == 0 ? '\t' : '\n'; break;
      case 5: cp = pick(0xA0, 0x17F); break;                                             // Latin
      case 6: cp = pick(0x400, 0x4FF); break;                                            // Cyrillic
      case 7: cp = pick(0x4E00, 0x9FFF); break;                                          // CJK
      case 8: cp = pick(0x1F300, 0x1FAFF); break;                                        // emoji
      case 9: {  // a short ASCII chunk repeated: equal-score pairs, so ties matter
        std::string chunk;
        for (uint32_t k = pick(1, 3); k > 0; --k) chunk.push_back(static_cast<char>(pick('a', 'e')));
        for (uint32_t k = pick(2, 6); k > 0; --k) s += chunk;
        continue;
      }
      default: do cp = pick(1, 0x10FFFF); while ((cp >= 0xD800 && cp <= 0xDFFF) || cp == 0x2581); break;
    }
    append_utf8(s, cp);
  }
  return s;
}

struct Family {
  std::vector<std::shared_ptr<const gb::Tokenizer>> forms;  // forms[0] is libsentencepiece
};

// Loads the three forms of one vocabulary (null entries fail the test).
Family load_family(const std::string& model_path, const std::string& bin_path, const std::string& gguf_path) {
  Family f;
  std::string error;
  f.forms.push_back(gbtest::file_tokenizer(model_path, error));
  f.forms.push_back(gbtest::file_tokenizer(bin_path, error));
  f.forms.push_back(gbtest::gguf_tokenizer(gguf_path, error));
  for (const auto& t : f.forms)
    if (!t) f.forms.clear();
  return f;
}

void check_family(const Family& family, uint32_t seed) {
  QVERIFY2(family.forms.size() == 3, "could not load all three tokenizer forms");
  std::mt19937 rng(seed);
  int num_cases = 0;
  for (int n = 0; n < 400; ++n) {
    const std::string text = random_text(rng);
    const std::vector<gb::TokenId> reference = family.forms[0]->encode(text, true);
    for (const auto& form : family.forms) {
      const std::vector<gb::TokenId> ids = form->encode(text, true);
      QVERIFY2(ids == reference, (std::string(form->kind()) + " vs sentencepiece on '" + gbtest::visible(text) +
                                  "': " + gbtest::ids_text(ids) + " vs " + gbtest::ids_text(reference)).c_str());
      const std::string back = form->decode(ids);
      QVERIFY2(back == text, (std::string(form->kind()) + " round trip of '" + gbtest::visible(text) + "' gave '" +
                              gbtest::visible(back) + "'").c_str());
    }
    ++num_cases;
  }
  QCOMPARE(num_cases, 400);
}

// Random ids, biased towards byte tokens so characters split across tokens and
// invalid byte runs are common.
void check_streaming(const gb::Tokenizer& tokenizer, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> any_id(0, tokenizer.vocab_size() - 1);
  std::uniform_int_distribution<int> byte_id(3, 258);
  for (int n = 0; n < 300; ++n) {
    std::vector<gb::TokenId> ids;
    const int num_ids = std::uniform_int_distribution<int>(0, 30)(rng);
    for (int i = 0; i < num_ids; ++i) ids.push_back((rng() % 3 == 0) ? any_id(rng) : byte_id(rng));
    gb::StreamingDecoder decoder(tokenizer);
    std::string streamed;
    for (const gb::TokenId id : ids) {
      const std::string piece = decoder.push(id);
      QVERIFY2(gb::utf8_sanitize(piece) == piece, "push returned invalid or partial UTF-8");
      streamed += piece;
    }
    streamed += decoder.flush();
    QVERIFY2(streamed == gb::utf8_sanitize(tokenizer.decode(ids)), gbtest::ids_text(ids).c_str());
  }
}

}  // namespace

GB_TEST(tok512_forms_agree_and_round_trip_random_text) {
  GB_REQUIRE_SHARED(model, "models/stories260K/tok512.model");
  GB_REQUIRE_SHARED(bin, "models/stories260K/tok512.bin");
  GB_REQUIRE_SHARED(gguf, "models/stories260K/stories260K.gguf");
  check_family(load_family(model, bin, gguf), 512);
}

GB_TEST(llama2_forms_agree_and_round_trip_random_text) {
  GB_REQUIRE_SHARED(model, "models/llama2-tokenizer/tokenizer.model");
  GB_REQUIRE_SHARED(bin, "models/llama2-tokenizer/tokenizer.bin");
  GB_REQUIRE_SHARED(gguf, "testdata/tokenizer/ggml-vocab-llama-spm.gguf");
  check_family(load_family(model, bin, gguf), 32000);
}

GB_TEST(streaming_matches_sanitized_decode_for_random_ids) {
  GB_REQUIRE_SHARED(model, "models/llama2-tokenizer/tokenizer.model");
  GB_REQUIRE_SHARED(bin, "models/stories260K/tok512.bin");
  GB_REQUIRE_SHARED(gguf, "testdata/tokenizer/ggml-vocab-llama-spm.gguf");
  std::string error;
  for (const auto& tok : {gbtest::file_tokenizer(model, error), gbtest::file_tokenizer(bin, error),
                          gbtest::gguf_tokenizer(gguf, error)}) {
    QVERIFY2(tok != nullptr, error.c_str());
    check_streaming(*tok, 7);
    if (QTest::currentTestFailed()) return;
  }
}

GB_TEST(load_tokenizer_picks_the_right_source) {
  GB_REQUIRE_SHARED(bin_model, "models/stories260K/stories260K.bin");
  GB_REQUIRE_SHARED(gguf_model, "models/stories260K/stories260K.gguf");
  GB_REQUIRE_SHARED(spm, "models/stories260K/tok512.model");
  auto bin = gb::load_model(bin_model);
  QVERIFY2(bin.ok(), bin.ok() ? "" : bin.error().message.c_str());
  auto gguf = gb::load_model(gguf_model);
  QVERIFY2(gguf.ok(), gguf.ok() ? "" : gguf.error().message.c_str());

  auto beside = gb::load_tokenizer(*bin.value(), "");  // finds tok512.bin next to the model
  QVERIFY2(beside.ok(), beside.ok() ? "" : beside.error().message.c_str());
  QCOMPARE(std::string(beside.value()->kind()), std::string("llama2c"));
  auto embedded = gb::load_tokenizer(*gguf.value(), "");
  QVERIFY2(embedded.ok(), embedded.ok() ? "" : embedded.error().message.c_str());
  QCOMPARE(std::string(embedded.value()->kind()), std::string("gguf-spm"));
  auto explicit_spm = gb::load_tokenizer(*gguf.value(), spm);  // an explicit path wins
  QVERIFY2(explicit_spm.ok(), explicit_spm.ok() ? "" : explicit_spm.error().message.c_str());
  QCOMPARE(std::string(explicit_spm.value()->kind()), std::string("sentencepiece"));

  // A model with no vocabulary and nothing beside it.
  gb::Model lonely;
  lonely.path = gbtest::temp_dir() + "/lonely.bin";
  lonely.config.vocab_size = 512;
  auto none = gb::load_tokenizer(lonely, "");
  QVERIFY(!none.ok());
  QVERIFY2(none.error().message.find("no tokenizer found") != std::string::npos, none.error().message.c_str());
  // tokenizer.model beside it is found last.
  std::filesystem::copy_file(spm, gbtest::temp_dir() + "/tokenizer.model");
  auto found = gb::load_tokenizer(lonely, "");
  QVERIFY2(found.ok(), found.ok() ? "" : found.error().message.c_str());
  QCOMPARE(std::string(found.value()->kind()), std::string("sentencepiece"));
}

GB_TEST(vocab_size_mismatch_is_an_error) {
  GB_REQUIRE_SHARED(model_path, "models/llama-2-tiny-random/llama-2-tiny-random.gguf");
  GB_REQUIRE_SHARED(tok_path, "models/stories260K/tok512.bin");
  auto model = gb::load_model(model_path);
  QVERIFY2(model.ok(), model.ok() ? "" : model.error().message.c_str());
  auto tok = gb::load_tokenizer(*model.value(), tok_path);
  QVERIFY(!tok.ok());
  const std::string want = "tokenizer vocab size 512 does not match model vocab size 32000 (files " + tok_path + ", " +
                           model_path + ")";
  QCOMPARE(tok.error().message, want);
}
