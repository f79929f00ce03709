// The `gpt-4o` pre-tokenizer row (gpt-oss's o200k_harmony vocabulary) against
// reference splits from Hugging Face `tokenizers` configured as gpt-oss's
// tokenizer.json (tests/data/pretok, made by tools/make_pretok_refs.py; README
// there): contractions after upper- and lower-case runs, digit runs, CJK, emoji,
// combining marks, newline and space runs, code, and llama.cpp's 46 tokenizer test
// strings. Also: the name is in the table, and a byte-level vocabulary that names
// it gets the row (no unknown-name warning) with its ignore_merges.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "gb_test.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_test_support.h"

namespace {

std::string pieces_text(const std::vector<std::string>& pieces) {
  std::string s = "[";
  for (size_t i = 0; i < pieces.size(); ++i) s += (i ? " '" : "'") + gbtest::visible(pieces[i]) + "'";
  return s + "]";
}

// GPT-2's byte -> character map, as tokenizer.ggml.tokens spells byte-level pieces:
// printable Latin-1 bytes stand for themselves, the others for U+0100 on, in order.
std::string byte_level_text(std::string_view bytes) {
  std::string s;
  for (const char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    uint32_t cp = b;
    if (!((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) {
      int before = 0;  // non-printable bytes below b
      for (int x = 0; x < b; ++x)
        if (!((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE)) ++before;
      cp = 256 + static_cast<uint32_t>(before);
    }
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else {
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  return s;
}

}  // namespace

GB_TEST(gpt4o_splits_match_the_hugging_face_reference) {
  const nlohmann::json ref = gbtest::read_json(std::string(GLASSBOX_PRETOK_REF_DIR) + "/gpt-4o.json");
  QCOMPARE(ref.at("schema").get<std::string>(), std::string("glassbox-pretok-ref-v1"));
  const std::string row = ref.at("row");
  auto pre = gb::PreTokenizer::create(row);
  QVERIFY2(pre.ok(), pre.ok() ? "" : pre.error().message.c_str());
  QCOMPARE(std::string((*pre)->name()), row);
  const nlohmann::json& cases = ref.at("cases");
  QVERIFY2(cases.size() >= 70, "the reference file lost its cases");
  size_t num_matching = 0;
  std::string report;
  for (const nlohmann::json& c : cases) {
    const std::string text = c.at("text");
    const std::vector<std::string> want = c.at("pieces");
    std::vector<std::string> got;
    for (const std::string_view piece : (*pre)->split(text)) got.emplace_back(piece);
    if (got == want) {
      ++num_matching;
    } else if (report.size() < 3000) {
      report += "\n  '" + gbtest::visible(text) + "':\n    got  " + pieces_text(got) + "\n    want " + pieces_text(want);
    }
  }
  std::printf("%s splits: %zu/%zu match the reference\n", row.c_str(), num_matching, cases.size());
  QVERIFY2(num_matching == cases.size(),
           (std::to_string(num_matching) + "/" + std::to_string(cases.size()) + " match:" + report).c_str());
}

GB_TEST(gpt4o_is_a_known_pre_tokenizer_name) {
  QVERIFY(gb::PreTokenizer::is_known("gpt-4o"));
  const std::vector<std::string_view> names = gb::PreTokenizer::known_names();
  QVERIFY(std::find(names.begin(), names.end(), std::string_view("gpt-4o")) != names.end());
  // Every row of the table compiles, so listing a name never promises a broken row.
  for (const std::string_view row : names) {
    const std::string first(row.substr(0, row.find('|')));
    auto pre = gb::PreTokenizer::create(first);
    QVERIFY2(pre.ok(), (std::string(row) + ": " + (pre.ok() ? "" : pre.error().message)).c_str());
    QCOMPARE(std::string((*pre)->name()), std::string(row));
  }
}

// A byte-level vocabulary naming "gpt-4o": 256 byte tokens, two whole words that
// no merge makes, and "123" from the merges "1 2", "12 3". Only the row's
// contraction-aware words with its ignore_merges give the whole-word ids (the
// default row, or merging alone, would give bytes); digits go in threes.
GB_TEST(gpt4o_vocabulary_gets_the_row) {
  gb::Vocabulary v;
  v.model = "gpt2";
  v.pre = "gpt-4o";
  for (int b = 0; b < 256; ++b) v.tokens.push_back(byte_level_text(std::string(1, static_cast<char>(b))));
  const gb::TokenId dont = 256, ill = 257, digits = 259, four = 0x34;  // four: the byte token of '4'
  for (const char* word : {"DON'T", " I'll", "12", "123"}) v.tokens.push_back(byte_level_text(word));
  v.merges = {"1 2", "12 3"};
  v.add_bos = false;
  std::string warning;
  auto made = gb::create_gguf_tokenizer(v, "hand-o200k", &warning);
  QVERIFY2(made.ok(), made.ok() ? "" : made.error().message.c_str());
  const std::shared_ptr<const gb::Tokenizer> tok = std::move(made).value();
  QVERIFY2(warning.empty(), warning.c_str());
  QCOMPARE(std::string(tok->pre_tokenizer()), std::string("gpt-4o"));
  const std::vector<gb::TokenId> want = {dont, ill, digits, digits, four};
  const std::vector<gb::TokenId> got = tok->encode("DON'T I'll1231234", /*add_bos=*/false);
  QVERIFY2(got == want, ("got " + gbtest::ids_text(got) + " want " + gbtest::ids_text(want)).c_str());
  QCOMPARE(tok->decode(got), std::string("DON'T I'll1231234"));
}
