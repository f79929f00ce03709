// SentencePiece BPE on hand-built vocabularies, expected ids worked out by hand
// from the algorithm's definition (gguf_spm_tokenizer.h): highest score first,
// leftmost on ties, unused pieces split back, control pieces never produced,
// bytes for whatever is left. Also the llama2.c (run.c) encoder on the same
// pieces and the llama2.c file reader.
#include <fstream>

#include "gb_test.h"
#include "hand_vocabulary.h"
#include "tokenizer/llama2c_tokenizer.h"
#include "tokenizer_test_support.h"

namespace {

using gbtest::kFirstHandPiece;
using gb::SpmTokenType;
using gbtest::kSp;

std::shared_ptr<const gb::GgufSpmTokenizer> make(const std::vector<gbtest::HandPiece>& pieces) {
  auto t = gb::GgufSpmTokenizer::create(gbtest::hand_vocabulary(pieces), "hand");
  GB_CHECK_MSG(t.ok(), t.ok() ? "" : t.error().message.c_str());
  return std::move(t).value();
}

#define EXPECT_IDS(tok, text, bos, ...)                                                               \
  do {                                                                                                \
    const std::vector<gb::TokenId> want_ = {__VA_ARGS__};                                             \
    const std::vector<gb::TokenId> got_ = (tok)->encode(text, bos);                                   \
    QVERIFY2(got_ == want_, ("'" + gbtest::visible(text) + "': got " + gbtest::ids_text(got_) +      \
                             " want " + gbtest::ids_text(want_)).c_str());                            \
  } while (0)

constexpr int A = kFirstHandPiece;  // ids of the hand pieces below
}  // namespace

GB_TEST(highest_score_merges_first_and_ties_go_left) {
  // 259 ▁  260 a  261 b  262 c  263 ab(-2)  264 bc(-1)  265 abc(-3)  266 ▁a(-5)
  const auto tok = make({{kSp, 0}, {"a", 0}, {"b", 0}, {"c", 0}, {"ab", -2}, {"bc", -1}, {"abc", -3}, {kSp + "a", -5}});
  // "▁abc": bc (-1) beats ab (-2) and ▁a (-5) -> ▁ a bc; then a+bc = abc (-3)
  // beats ▁+a (-5) -> ▁ abc; "▁abc" is no piece, so the result is [▁, abc].
  EXPECT_IDS(tok, "abc", false, A + 0, A + 6);
  // "▁abab": ab at offsets 1 and 3 tie at -2; the left one merges first, then the
  // right one; ▁a (-5) was beaten by ab (-2) for the first a.
  EXPECT_IDS(tok, "abab", false, A + 0, A + 4, A + 4);
  // "▁a": only ▁a is possible.
  EXPECT_IDS(tok, "a", true, 1, A + 7);
  // Empty text: no dummy prefix, nothing but the optional BOS.
  EXPECT_IDS(tok, "", true, 1);
  EXPECT_IDS(tok, "", false);
  // Spaces become ▁ and are never collapsed: "▁▁a▁▁" -> ▁ ▁a ▁ ▁.
  EXPECT_IDS(tok, " a  ", false, A + 0, A + 7, A + 0, A + 0);
}

GB_TEST(equal_scores_merge_the_leftmost_pair) {
  // 259 ▁  260 a  261 b  262 ab(-2)  263 ba(-2): in "▁aba" both pairs score -2;
  // the left one wins -> [▁, ab, a]; a right-first rule would give [▁, a, ba].
  const auto tok = make({{kSp, 0}, {"a", 0}, {"b", 0}, {"ab", -2}, {"ba", -2}});
  EXPECT_IDS(tok, "aba", false, A + 0, A + 3, A + 1);
  // "▁bab": ba at offset 1 is leftmost -> [▁, ba, b].
  EXPECT_IDS(tok, "bab", false, A + 0, A + 4, A + 2);
}

GB_TEST(unused_piece_is_split_back_into_its_halves) {
  // 259 ▁  260 x  261 y  262 z  263 xy (unused, best score)  264 xyz (-1)
  const auto tok = make({{kSp, 0}, {"x", 0}, {"y", 0}, {"z", 0}, {"xy", 0, SpmTokenType::Unused}, {"xyz", -1}});
  // x+y -> xy (unused) may merge on into xyz, a normal piece: kept.
  EXPECT_IDS(tok, "xyz", false, A + 0, A + 5);
  // "xyx": xy is final and unused -> emitted as x, y.
  EXPECT_IDS(tok, "xyx", false, A + 0, A + 1, A + 2, A + 1);
}

GB_TEST(control_pieces_are_never_produced_by_merges) {
  // "<s>" exists only as the control token 1; "<s" is a normal piece.
  const auto tok = make({{kSp, 0}, {"<", 0}, {"s", 0}, {">", 0}, {"<s", -1}});
  EXPECT_IDS(tok, "<s>", false, A + 0, A + 4, A + 3);
}

GB_TEST(characters_outside_the_vocabulary_fall_back_to_bytes) {
  const auto tok = make({{kSp, 0}, {"J", 0}, {"r", 0}, {"g", 0}, {"e", 0}, {"n", 0}, {"\t", 0}});
  // ü = C3 BC is no piece -> <0xC3> <0xBC> = ids 3+0xC3, 3+0xBC; \n -> <0x0A>.
  EXPECT_IDS(tok, "J\xC3\xBCrgen\n\t", false, A + 0, A + 1, 3 + 0xC3, 3 + 0xBC, A + 2, A + 3, A + 4, A + 5, 3 + 0x0A, A + 6);
  QCOMPARE(tok->decode(tok->encode("J\xC3\xBCrgen\n\t", true)), std::string("J\xC3\xBCrgen\n\t"));
  // A 4-byte emoji: four byte tokens.
  EXPECT_IDS(tok, "\xF0\x9F\xA6\x99", false, A + 0, 3 + 0xF0, 3 + 0x9F, 3 + 0xA6, 3 + 0x99);
}

GB_TEST(decode_strips_only_the_dummy_prefix) {
  const auto tok = make({{kSp, 0}, {"a", 0}, {kSp + "a", -1}});
  // Leading space of the first text piece after BOS goes; later ones stay.
  const std::vector<gb::TokenId> ids = {1, A + 2, A + 2, 2, 1, A + 2};
  QCOMPARE(tok->decode(ids), std::string("a aa"));
  // A byte token <0x20> at the start is a real space, not a dummy prefix.
  const std::vector<gb::TokenId> byte_space = {1, 3 + 0x20, A + 1};
  QCOMPARE(tok->decode(byte_space), std::string(" a"));
  QCOMPARE(tok->token_bytes(A + 2), std::string(" a"));
  QCOMPARE(tok->token_piece(A + 2), kSp + "a");
  QCOMPARE(tok->token_bytes(1), std::string(""));
  QVERIFY(tok->is_control(0) && tok->is_control(1) && !tok->is_control(A));
  QVERIFY(tok->is_byte(3) && !tok->is_byte(A));
}

GB_TEST(gguf_vocabulary_errors_name_the_source) {
  gb::Vocabulary v = gbtest::hand_vocabulary({});
  v.model = "gpt2";
  auto r = gb::GgufSpmTokenizer::create(v, "m.gguf");
  QVERIFY(!r.ok());
  QVERIFY2(r.error().message.find("m.gguf") != std::string::npos && r.error().message.find("gpt2") != std::string::npos,
           r.error().message.c_str());
  v = gbtest::hand_vocabulary({});
  v.scores.pop_back();
  QVERIFY(!gb::GgufSpmTokenizer::create(v, "m.gguf").ok());
  v = gbtest::hand_vocabulary({});
  v.bos_id = 9999;
  QVERIFY(!gb::GgufSpmTokenizer::create(v, "m.gguf").ok());
}

GB_TEST(llama2c_encoder_on_hand_pieces) {
  // The same merge rules with literal spaces, as run.c sees them; ids 3..258 are
  // the byte tokens. 259 " "  260 a  261 b  262 ab(-2)  263 " a"(-1)
  std::vector<std::string> pieces = {"<unk>", "\n<s>\n", "\n</s>\n"};
  std::vector<float> scores = {0, 0, 0};
  static const char* hex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    pieces.push_back(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">");
    scores.push_back(0);
  }
  for (const auto& [p, s] : std::vector<std::pair<std::string, float>>{{" ", 0}, {"a", 0}, {"b", 0}, {"ab", -2}, {" a", -1}}) {
    pieces.push_back(p);
    scores.push_back(s);
  }
  auto made = gb::Llama2cTokenizer::from_pieces(pieces, scores, "hand");
  QVERIFY(made.ok());
  const auto tok = std::move(made).value();
  // " ab": " a" (-1) beats ab (-2) -> [" a", b].
  EXPECT_IDS(tok, "ab", true, 1, A + 4, A + 2);
  // "é" (C3 A9) is no piece -> its bytes; they never merge with neighbours.
  EXPECT_IDS(tok, "a\xC3\xA9", false, A + 4, 3 + 0xC3, 3 + 0xA9);
  QCOMPARE(tok->decode(tok->encode("a\xC3\xA9 b", true)), std::string("a\xC3\xA9 b"));
  QCOMPARE(tok->token_bytes(1), std::string(""));
  QCOMPARE(tok->token_bytes(3 + 0x41), std::string("A"));
  QCOMPARE(tok->token_piece(1), std::string("\n<s>\n"));
}

GB_TEST(llama2c_reader_rejects_truncated_files) {
  const std::string path = gbtest::temp_dir() + "/bad_tok.bin";
  {
    std::ofstream out(path, std::ios::binary);
    const uint32_t max_len = 4;
    const float score = 0;
    const uint32_t len = 10;  // longer than max_token_len and than the file
    out.write(reinterpret_cast<const char*>(&max_len), 4);
    out.write(reinterpret_cast<const char*>(&score), 4);
    out.write(reinterpret_cast<const char*>(&len), 4);
    out.write("abc", 3);
  }
  auto r = gb::Llama2cTokenizer::load(path);
  QVERIFY(!r.ok());
  QVERIFY2(r.error().message.find(path) != std::string::npos && r.error().message.find("token 0") != std::string::npos,
           r.error().message.c_str());
  QVERIFY(!gb::Llama2cTokenizer::load(gbtest::temp_dir() + "/missing.bin").ok());
}
