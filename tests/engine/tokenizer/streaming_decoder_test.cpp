// StreamingDecoder and the UTF-8 classifier. Byte tokens of multi-byte characters
// are fed one at a time: nothing may come out until the character is whole;
// bytes that can never form a character come out as U+FFFD (Unicode's
// "maximal subpart" rule, Table 3-7 / section 3.9 of the standard). Expected
// strings are written out by hand.
#include "gb_test.h"
#include "hand_vocabulary.h"
#include "core/utf8.h"
#include "tokenizer_test_support.h"

namespace {

using gbtest::kFirstHandPiece;
using gbtest::kSp;
const std::string kFffd = "\xEF\xBF\xBD";
constexpr gb::TokenId byte_token(int b) { return 3 + b; }

std::shared_ptr<const gb::GgufSpmTokenizer> make_tokenizer() {
  // 259 ▁Hello  260 ▁  261 x
  auto t = gb::GgufSpmTokenizer::create(gbtest::hand_vocabulary({{kSp + "Hello", 0}, {kSp, 0}, {"x", 0}}), "hand");
  GB_CHECK(t.ok());
  return std::move(t).value();
}

}  // namespace

GB_TEST(utf8_classifier_follows_table_3_7) {
  using gb::Utf8Kind;
  auto step = [](std::string_view s) { return gb::utf8_next(s, 0); };
  QVERIFY(step("a").kind == Utf8Kind::Complete && step("a").num_bytes == 1);
  QVERIFY(step("\xC3\xBC").kind == Utf8Kind::Complete && step("\xC3\xBC").num_bytes == 2);
  QVERIFY(step("\xF0\x9F\xA6\x99").kind == Utf8Kind::Complete && step("\xF0\x9F\xA6\x99").num_bytes == 4);
  QVERIFY(step("\xE2\x82").kind == Utf8Kind::Incomplete && step("\xE2\x82").num_bytes == 2);
  QVERIFY(step("\xC0\x80").kind == Utf8Kind::Invalid && step("\xC0\x80").num_bytes == 1);      // overlong lead
  QVERIFY(step("\xED\xA0\x80").kind == Utf8Kind::Invalid && step("\xED\xA0\x80").num_bytes == 1);  // surrogate
  QVERIFY(step("\xE0\x80\x80").kind == Utf8Kind::Invalid);                                       // overlong
  QVERIFY(step("\xF4\x90\x80\x80").kind == Utf8Kind::Invalid);                                   // > U+10FFFF
  QVERIFY(step("\xE2\x82x").kind == Utf8Kind::Invalid && step("\xE2\x82x").num_bytes == 2);      // maximal subpart
  QVERIFY(step("\x80").kind == Utf8Kind::Invalid);
  QCOMPARE(gb::utf8_sanitize("a\xFF" "b\xE2\x82"), "a" + kFffd + "b" + kFffd);
}

GB_TEST(readable_token_text_shows_partial_characters_as_bytes) {
  // Valid characters stay; each byte of a truncated or invalid run is <0xHH>.
  QCOMPARE(gb::utf8_readable("caf\xC3\xA9"), std::string("caf\xC3\xA9"));
  QCOMPARE(gb::utf8_readable("\xE2\x82"), std::string("<0xE2><0x82>"));           // first 2 bytes of the euro sign
  QCOMPARE(gb::utf8_readable("\xAC"), std::string("<0xAC>"));                      // its last byte alone
  QCOMPARE(gb::utf8_readable(" \xF0\x9F"), std::string(" <0xF0><0x9F>"));
  QCOMPARE(gb::utf8_readable("a\xFF" "b"), std::string("a<0xFF>b"));
  QCOMPARE(gb::utf8_readable(""), std::string(""));
  // Every output is valid UTF-8 (sanitizing it changes nothing).
  for (int b = 0; b < 256; ++b) {
    const std::string one(1, static_cast<char>(b));
    const std::string r = gb::utf8_readable(one);
    QCOMPARE(gb::utf8_sanitize(r), r);
    QVERIFY(b < 0x80 ? r == one : r.size() == 6);
  }
}

GB_TEST(emoji_from_byte_tokens_is_held_until_complete) {
  const auto tok = make_tokenizer();
  gb::StreamingDecoder dec(*tok);
  dec.prime(std::vector<gb::TokenId>{1});
  QCOMPARE(dec.push(kFirstHandPiece), std::string("Hello"));  // dummy prefix stripped after BOS
  QCOMPARE(dec.push(kFirstHandPiece + 1), std::string(" "));
  // 🦙 U+1F999 = F0 9F A6 99.
  QCOMPARE(dec.push(byte_token(0xF0)), std::string(""));
  QCOMPARE(dec.push(byte_token(0x9F)), std::string(""));
  QCOMPARE(dec.push(byte_token(0xA6)), std::string(""));
  QCOMPARE(dec.push(byte_token(0x99)), std::string("\xF0\x9F\xA6\x99"));
  // ü = C3 BC split across tokens, then an ASCII piece in the same push.
  QCOMPARE(dec.push(byte_token(0xC3)), std::string(""));
  QCOMPARE(dec.push(byte_token(0xBC)), std::string("\xC3\xBC"));
  QCOMPARE(dec.push(2), std::string(""));  // EOS prints nothing
  QCOMPARE(dec.flush(), std::string(""));
}

GB_TEST(impossible_continuations_become_replacement_characters) {
  const auto tok = make_tokenizer();
  gb::StreamingDecoder dec(*tok);
  dec.prime(std::vector<gb::TokenId>{1, kFirstHandPiece});  // prompt already printed
  QCOMPARE(dec.push(byte_token(0xFF)), kFffd);              // can never be valid
  QCOMPARE(dec.push(byte_token(0xF0)), std::string(""));
  QCOMPARE(dec.push(byte_token(0x9F)), std::string(""));
  QCOMPARE(dec.push(kFirstHandPiece + 2), kFffd + "x");     // F0 9F then 'x': one U+FFFD, then x
  QCOMPARE(dec.push(kFirstHandPiece), std::string(" Hello"));  // not at start: space kept
  QCOMPARE(dec.push(byte_token(0xE2)), std::string(""));
  QCOMPARE(dec.flush(), kFffd);                             // truncated at the end
  QCOMPARE(dec.flush(), std::string(""));
}

GB_TEST(streaming_equals_decode_for_valid_text) {
  const auto tok = make_tokenizer();
  const std::string text = "Hello \xF0\x9F\xA6\x99 x\xC3\xBC\xE4\xB8\xAD Hello";
  const std::vector<gb::TokenId> ids = tok->encode(text, true);
  gb::StreamingDecoder dec(*tok);
  std::string streamed;
  for (const gb::TokenId id : ids) {
    const std::string piece = dec.push(id);
    QVERIFY2(gb::utf8_sanitize(piece) == piece, "a push returned a partial character");
    streamed += piece;
  }
  streamed += dec.flush();
  QCOMPARE(streamed, text);
  QCOMPARE(tok->decode(ids), text);
}
