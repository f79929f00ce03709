// Tokenization of arbitrary bytes with every vocabulary in ../shared: the
// llama2.c tokenizer.bin files, the SentencePiece .model files, the
// testdata/tokenizer/ggml-vocab-*.gguf vocabularies and the vocabularies inside
// the shared GGUF models. Input: byte 0 picks the vocabulary, byte 1 the options
// (bit 0 parse_special, bit 1 BOS), the rest is the text.
// Checks: encode then decode never crash and give ids inside the vocabulary;
// the streamed decode equals the sanitized whole decode; valid UTF-8 text comes
// back unchanged (plain text, no BOS) when the vocabulary can give back every
// byte of it (measured per byte at start-up and printed: some byte-level
// vocabularies lack a few byte tokens).
#include <algorithm>
#include <array>
#include <initializer_list>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <vector>

#include "core/utf8.h"
#include "fuzz_support.h"
#include "fuzz_tokenizer_use.h"
#include "model/gguf_vocabulary.h"
#include "tokenizer/tokenizer.h"

namespace {

struct Vocab {
  std::string name;
  std::shared_ptr<const gb::Tokenizer> tokenizer;
  // Bytes that can come back from decode: some byte-level vocabularies have no
  // token for a few bytes (Falcon: 0x03, 0x05, 0xF2 ...), and text holding them
  // cannot round-trip. Measured at start-up (representable_bytes()).
  std::array<bool, 256> representable{};
  int num_representable = 0;
};

bool valid_utf8(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    const gb::Utf8Step step = gb::utf8_next(text, pos);
    if (step.kind != gb::Utf8Kind::Complete) return false;
    pos += step.num_bytes;
  }
  return true;
}

// Text no SentencePiece tokenizer can give back: U+0000 and U+2581 (its space mark).
bool has_spm_unrepresentable(std::string_view text) {
  return text.find('\0') != std::string_view::npos || text.find("\xE2\x96\x81") != std::string_view::npos;
}

bool round_trip_ok(const gb::Tokenizer& tok, std::string_view text) {
  gb::EncodeOptions plain;
  plain.add_bos = false;
  const std::vector<gb::TokenId> ids = tok.encode(text, plain);
  return tok.decode(ids) == text;
}

// Which bytes survive encode -> decode, each tested inside a valid character
// between ASCII letters: an ASCII byte alone, a lead byte with continuation bytes,
// and a continuation byte after two different leads.
std::array<bool, 256> representable_bytes(const gb::Tokenizer& tok) {
  std::array<bool, 256> ok{};
  const auto trip = [&](std::string ch) { return round_trip_ok(tok, "a" + ch + "a"); };
  for (int b = 1; b < 0x80; ++b) ok[b] = trip(std::string(1, static_cast<char>(b)));
  const auto bytes = [](std::initializer_list<int> v) {
    std::string s;
    for (int b : v) s.push_back(static_cast<char>(b));
    return s;
  };
  for (int l = 0xC2; l <= 0xDF; ++l) ok[l] = trip(bytes({l, 0x80})) || trip(bytes({l, 0xA9}));
  for (int l = 0xE0; l <= 0xEF; ++l) ok[l] = trip(bytes({l, l == 0xE0 ? 0xA0 : 0x80, 0x80})) || trip(bytes({l, 0x9F, 0xBF}));
  for (int l = 0xF0; l <= 0xF4; ++l) ok[l] = trip(bytes({l, l == 0xF0 ? 0x90 : 0x80, 0x80, 0x80}));
  for (int c = 0x80; c <= 0xBF; ++c) ok[c] = trip(bytes({0xC2, c})) || trip(bytes({0xE4, 0xB8, c}));
  return ok;
}

bool all_representable(const Vocab& v, std::string_view text) {
  for (const char c : text)
    if (!v.representable[static_cast<unsigned char>(c)]) return false;
  return true;
}

std::vector<Vocab> load_all() {
  namespace fs = std::filesystem;
  const fs::path root = gbfuzz::shared_dir();
  std::vector<fs::path> files, ggufs;
  for (const char* dir : {"models", "testdata/tokenizer"}) {
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(root / dir, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      const fs::path& p = it->path();
      const std::string name = p.filename().string();
      if (p.extension() == ".gguf") ggufs.push_back(p);
      else if (p.extension() == ".model" || (p.extension() == ".bin" && name.rfind("tok", 0) == 0)) files.push_back(p);
    }
  }
  std::sort(files.begin(), files.end());
  std::sort(ggufs.begin(), ggufs.end());
  std::vector<Vocab> out;
  const auto add = [&](const fs::path& p, gb::Result<std::shared_ptr<const gb::Tokenizer>> tok) {
    const std::string rel = fs::relative(p, root).string();
    if (!tok.ok()) {
      std::fprintf(stderr, "fuzz_tokenize: skipped %s: %s\n", rel.c_str(), tok.error().message.c_str());
      return;
    }
    Vocab v{rel, std::move(tok).value()};
    v.representable = representable_bytes(*v.tokenizer);
    std::string missing;
    for (int b = 1; b < 256; ++b) {
      if (b == 0xC0 || b == 0xC1 || b >= 0xF5) continue;  // never in valid UTF-8
      if (v.representable[b]) ++v.num_representable;
      else missing += (missing.empty() ? "" : " ") + std::to_string(b);
    }
    std::fprintf(stderr, "fuzz_tokenize: %s (%s, %d tokens): round trip checked on text of %d byte values%s%s\n",
                 rel.c_str(), std::string(v.tokenizer->kind()).c_str(), v.tokenizer->vocab_size(),
                 v.num_representable, missing.empty() ? "" : "; cannot round-trip bytes ", missing.c_str());
    out.push_back(std::move(v));
  };
  for (const fs::path& p : files) add(p, gb::load_tokenizer_file(p.string()));
  for (const fs::path& p : ggufs) {
    auto vocab = gb::read_gguf_vocabulary(p.string());
    if (!vocab.ok()) {
      add(p, gb::Error{vocab.error().message});
      continue;
    }
    add(p, gb::create_gguf_tokenizer(std::move(vocab).value(), p.string()));
  }
  if (out.empty()) gbfuzz::fuzz_fail("no vocabulary could be loaded from " + root.string());
  return out;
}

const std::vector<Vocab>& vocabs() {
  static const std::vector<Vocab> all = load_all();
  return all;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)vocabs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const Vocab& v = vocabs()[data[0] % vocabs().size()];
  const gb::Tokenizer& tok = *v.tokenizer;
  gb::EncodeOptions options;
  options.parse_special = (data[1] & 1) != 0;
  const bool bos = (data[1] & 2) != 0;
  options.add_bos = bos;
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);

  const std::vector<gb::TokenId> ids = tok.encode(text, options);
  gbfuzz::check_ids_in_range(tok, ids);
  const std::string decoded = tok.decode(ids);
  gb::StreamingDecoder stream(tok);
  std::string streamed;
  for (const gb::TokenId id : ids) streamed += stream.push(id);
  streamed += stream.flush();
  if (streamed != gb::utf8_sanitize(decoded))
    gbfuzz::fuzz_fail(v.name + ": streamed decode differs from the sanitized decode");

  const bool spm_like = tok.strips_dummy_prefix();
  if (!options.parse_special && !bos && valid_utf8(text) && all_representable(v, text) &&
      !(spm_like && has_spm_unrepresentable(text)) && decoded != text)
    gbfuzz::fuzz_fail(v.name + ": valid UTF-8 did not round-trip: '" + gb::utf8_readable(text) + "' came back as '" +
                      gb::utf8_readable(decoded) + "' (" + std::to_string(ids.size()) + " ids)");
  return 0;
}
