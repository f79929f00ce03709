// SHA-256 against the test vectors published with FIPS 180-4 / NIST CSRC
// ("abc", the 448-bit and 896-bit messages, one million 'a') and the empty
// string; streaming in awkward piece sizes must equal one-shot hashing.
#include <fstream>

#include "gb_test.h"
#include "core/sha256.h"

GB_TEST(sha256_standard_vectors) {
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
