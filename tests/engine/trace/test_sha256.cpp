// SHA-256 against the test vectors published with FIPS 180-4 / NIST CSRC
// ("abc", the 448-bit and 896-bit messages, one million 'a') and the empty
// string; streaming in awkward piece sizes must equal one-shot hashing; the
// SHA-NI rounds equal the portable ones on every length from 0 to 700 bytes and
// on multi-block runs (skipped, and said so, on a processor without SHA-NI).
#include <cstdio>
#include <fstream>
#include <random>

#include "gb_test.h"
#include "core/sha256.h"

namespace {
std::string hex_of(gb::Sha256::Impl impl, std::string_view data) {
  gb::Sha256 h(impl);
  h.update(data);
  return gb::Sha256::hex(h.finish());
}
}  // namespace

GB_TEST(sha256_standard_vectors) {
  for (auto impl : {gb::Sha256::Impl::Scalar, gb::Sha256::Impl::Auto}) {
    QCOMPARE(hex_of(impl, "abc"), std::string("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
    QCOMPARE(hex_of(impl, std::string(1000000, 'a')),
             std::string("cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
  }
  QCOMPARE(gb::sha256_hex(""), std::string("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
  QCOMPARE(gb::sha256_hex("abc"), std::string("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
  QCOMPARE(gb::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
           std::string("248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"));
  QCOMPARE(gb::sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs"
                          "mnopqrstnopqrstu"),
           std::string("cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"));
  QCOMPARE(gb::sha256_hex(std::string(1000000, 'a')),
           std::string("cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
}

GB_TEST(sha256_streaming_equals_one_shot) {
  std::string data;
  for (int i = 0; i < 1000; ++i) data += static_cast<char>((i * 7919) & 0xff);
  const std::string expected = gb::sha256_hex(data);
  for (size_t piece : {size_t{1}, size_t{3}, size_t{55}, size_t{56}, size_t{63}, size_t{64}, size_t{65}, size_t{999}}) {
    gb::Sha256 h;
    for (size_t pos = 0; pos < data.size(); pos += piece) h.update(std::string_view(data).substr(pos, piece));
    QCOMPARE(gb::Sha256::hex(h.finish()), expected);
  }
  // Lengths around the padding boundary (55, 56, 64 bytes) hash differently from each other.
  QVERIFY(gb::sha256_hex(std::string(55, 'x')) != gb::sha256_hex(std::string(56, 'x')));
}

GB_TEST(sha256_of_a_file) {
  const std::string path = gbtest::temp_dir() + "/abc.bin";
  std::ofstream(path, std::ios::binary) << "abc";
  auto digest = gb::sha256_file_hex(path);
  QVERIFY(digest.ok());
  QCOMPARE(digest.value(), std::string("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
  auto missing = gb::sha256_file_hex(path + ".nope");
  QVERIFY(!missing.ok());
  QVERIFY(missing.error().message.find("abc.bin.nope") != std::string::npos);
}

GB_TEST(sha256_hardware_rounds_equal_the_portable_ones) {
  if (!gb::Sha256::hardware_available()) QSKIP("this processor has no SHA-NI: only the portable rounds run here");
  std::mt19937 rng(20261202);
  std::string data(70000, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  for (size_t n = 0; n <= 700; ++n)
    QCOMPARE(hex_of(gb::Sha256::Impl::Auto, std::string_view(data).substr(0, n)),
             hex_of(gb::Sha256::Impl::Scalar, std::string_view(data).substr(0, n)));
  // Many blocks in one call (the state stays in registers across them), fed in
  // pieces that leave partial blocks between calls.
  for (size_t piece : {size_t{64}, size_t{1000}, size_t{4096 + 7}, data.size()}) {
    gb::Sha256 fast(gb::Sha256::Impl::Auto), portable(gb::Sha256::Impl::Scalar);
    for (size_t pos = 0; pos < data.size(); pos += piece) {
      fast.update(std::string_view(data).substr(pos, piece));
      portable.update(std::string_view(data).substr(pos, piece));
    }
    QCOMPARE(gb::Sha256::hex(fast.finish()), gb::Sha256::hex(portable.finish()));
  }
  // And against a digest from outside (Python's hashlib, the same bytes).
  std::string counting(1 << 16, '\0');
  for (size_t i = 0; i < counting.size(); ++i) counting[i] = static_cast<char>(i * 31 + 7);
  QCOMPARE(hex_of(gb::Sha256::Impl::Auto, counting),
           std::string("ef4636928161808e87035fa51983821677527ccd9661991c5d0126a778b2268a"));
}
