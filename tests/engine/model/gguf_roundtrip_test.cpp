// GgufWriter -> GgufFile round trips: every metadata value type (including
// nested arrays and empty arrays), both GGUF versions, a non-default
// alignment, and tensor bytes/offsets. Expected values are the literals written.
#include <cstring>

#include "gb_test.h"
#include "model/gguf_file.h"
#include "model/gguf_writer.h"
#include "model/mapped_file.h"

using gb::GgufValue;

namespace {

std::vector<std::pair<std::string, GgufValue>> every_type() {
  return {
      {"t.u8", GgufValue::u8(250)},
      {"t.i8", GgufValue::i8(-7)},
      {"t.u16", GgufValue::u16(65000)},
      {"t.i16", GgufValue::i16(-30000)},
      {"t.u32", GgufValue::u32(4000000000u)},
      {"t.i32", GgufValue::i32(-2000000000)},
      {"t.u64", GgufValue::u64(18000000000000000000ull)},
      {"t.i64", GgufValue::i64(-9000000000000000000ll)},
      {"t.f32", GgufValue::f32(0.15625f)},
      {"t.f64", GgufValue::f64(-2.5e300)},
      {"t.bool", GgufValue::boolean(true)},
      {"t.str", GgufValue::str("h\xC3\xA9llo \xE2\x96\x81 world")},
      {"t.empty_str", GgufValue::str("")},
      {"t.strs", GgufValue::string_array({"a", "", "\xE2\x96\x81the"})},
      {"t.f32s", GgufValue::f32_array({1.5f, -0.25f})},
      {"t.i32s", GgufValue::i32_array({})},
      {"t.nested", GgufValue::array_of_arrays({GgufValue::i32_array({1, 2, 3}), GgufValue::string_array({"x"}),
                                               GgufValue::array_of_arrays({})})},
  };
}

}  // namespace

GB_TEST(metadata_of_every_type_round_trips) {
  for (uint32_t version : {2u, 3u}) {
    gb::GgufWriter w(64, version);
    for (auto& [k, v] : every_type()) w.add_metadata(k, v);
    std::vector<std::byte> a(10 * 4), b(3 * 2);
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<std::byte>(i);
    for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::byte>(200 + i);
    w.add_tensor("a", {5, 2}, gb::WeightType::F32, a);
    w.add_tensor("b", {3}, gb::WeightType::F16, b);
    const std::string path = gbtest::temp_dir() + "/roundtrip-v" + std::to_string(version) + ".gguf";
    gb::Status st = w.write(path);
    QVERIFY2(st.ok(), st.ok() ? "" : st.error().message.c_str());

    auto f = gb::GgufFile::open(path);
    QVERIFY2(f.ok(), f.ok() ? "" : f.error().message.c_str());
    QCOMPARE(f->version(), version);
    QCOMPARE(f->alignment(), 64u);
    QCOMPARE(f->data_offset() % 64, uint64_t{0});
    const auto expected = every_type();
    QCOMPARE(f->metadata().size(), expected.size() + 1);  // + general.alignment
    for (const auto& [k, v] : expected) {
      const GgufValue* got = f->find(k);
      QVERIFY2(got != nullptr, k.c_str());
      QVERIFY2(*got == v, k.c_str());
    }
    QCOMPARE(*f->find("t.u8")->as_int(), int64_t{250});
    QCOMPARE(*f->find("t.i16")->as_int(), int64_t{-30000});
    QCOMPARE(*f->find("t.u64")->as_uint(), uint64_t{18000000000000000000ull});
    QVERIFY(!f->find("t.u64")->as_int().has_value());  // does not fit in int64
    QCOMPARE(*f->find("t.f64")->as_double(), -2.5e300);
    QCOMPARE(f->find("t.f32s")->double_at(1), -0.25);
    QCOMPARE(f->find("t.nested")->arrays[0].int_at(2), int64_t{3});
    QCOMPARE(f->find("t.nested")->arrays[1].strings[0], std::string("x"));

    QCOMPARE(f->tensors().size(), size_t{2});
    const gb::GgufTensorInfo* ta = f->find_tensor("a");
    const gb::GgufTensorInfo* tb = f->find_tensor("b");
    QVERIFY(ta && tb);
    QCOMPARE(ta->dims, (std::vector<uint64_t>{5, 2}));
    QCOMPARE(ta->offset, uint64_t{0});
    QCOMPARE(tb->offset, uint64_t{64});  // 40 bytes rounded up to the alignment
    QVERIFY(tb->dtype == gb::WeightType::F16);
    QVERIFY(std::memcmp(f->tensor_data(*ta), a.data(), a.size()) == 0);
    QVERIFY(std::memcmp(f->tensor_data(*tb), b.data(), b.size()) == 0);
  }
}

GB_TEST(metadata_only_read_skips_tensor_infos) {
  gb::GgufWriter w;
  w.add_metadata("k", GgufValue::str("v"));
  w.add_tensor("bad", {4}, 8, 34, {});  // Q8_0: rejected by a full read
  const std::string path = gbtest::temp_dir() + "/meta-only.gguf";
  QVERIFY(w.write(path).ok());
  QVERIFY(!gb::GgufFile::open(path).ok());
  auto f = gb::GgufFile::open(path, gb::GgufReadOptions{.metadata_only = true});
  QVERIFY(f.ok());
  QCOMPARE(f->find("k")->string, std::string("v"));
  QVERIFY(f->tensors().empty());
}

GB_TEST(mapped_file_reports_size_and_bytes) {
  const std::string path = gbtest::temp_dir() + "/bytes.bin";
  gb::GgufWriter w;
  QVERIFY(w.write(path).ok());
  auto m = gb::MappedFile::open(path);
  QVERIFY(m.ok());
  QCOMPARE(m.value()->size_bytes(), size_t{32});  // 24-byte header padded to the 32-byte alignment
  QCOMPARE(std::memcmp(m.value()->data(), "GGUF", 4), 0);
}
