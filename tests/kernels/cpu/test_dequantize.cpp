// Reference dequantization of every quantized weight type, bit for bit against
// gguf-py's dequantization of the same blocks (../shared/testdata/quant: real
// rows copied from llama-quantize output and crafted extreme rows; see its
// README). Every float must have the same bit pattern, zeros' signs included.
// MXFP4, which the shared files predate, has its gguf-py reference in
// tests/data/mxfp4 (test_mxfp4.cpp).
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "cpu/weight_type.h"
#include "gb_test.h"
#include "model/gguf_file.h"

using gb::kernels::WeightType;

namespace {

std::vector<float> read_f32(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<char> raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<float> out(raw.size() / sizeof(float));
  std::memcpy(out.data(), raw.data(), out.size() * sizeof(float));
  return out;
}

void check_type(WeightType t) {
  const auto& traits = gb::kernels::weight_traits(t);
  const std::string name(traits.name);
  GB_REQUIRE_SHARED(gguf_path, "testdata/quant/" + name + ".gguf");
  GB_REQUIRE_SHARED(ref_path, "testdata/quant/" + name + ".f32");
  auto file = gb::GgufFile::open(gguf_path);
  QVERIFY2(file.ok(), file.ok() ? "" : file.error().message.c_str());
  const std::vector<float> ref = read_f32(ref_path);
  QCOMPARE(ref.size(), size_t{12288});
  size_t offset = 0;
  for (const char* tensor : {"real", "extreme"}) {
    const gb::GgufTensorInfo* info = file->find_tensor(tensor);
    QVERIFY2(info != nullptr, tensor);
    QVERIFY(info->dtype == t);
    const int64_t n = static_cast<int64_t>(info->num_elements());
    std::vector<float> got(static_cast<size_t>(n));
    traits.dequantize_row(file->tensor_data(*info), got.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      uint32_t a, b;
      std::memcpy(&a, &got[static_cast<size_t>(i)], 4);
      std::memcpy(&b, &ref[offset + static_cast<size_t>(i)], 4);
      if (a != b)
        QFAIL((name + " " + tensor + " value " + std::to_string(i) + ": got " + std::to_string(got[static_cast<size_t>(i)]) +
               " want " + std::to_string(ref[offset + static_cast<size_t>(i)]))
                  .c_str());
    }
    offset += static_cast<size_t>(n);
  }
}

}  // namespace

GB_TEST(dequantize_q4_0_bit_exact) { check_type(WeightType::Q4_0); }
GB_TEST(dequantize_q4_1_bit_exact) { check_type(WeightType::Q4_1); }
GB_TEST(dequantize_q5_0_bit_exact) { check_type(WeightType::Q5_0); }
GB_TEST(dequantize_q5_1_bit_exact) { check_type(WeightType::Q5_1); }
GB_TEST(dequantize_q8_0_bit_exact) { check_type(WeightType::Q8_0); }
GB_TEST(dequantize_q2_k_bit_exact) { check_type(WeightType::Q2_K); }
GB_TEST(dequantize_q3_k_bit_exact) { check_type(WeightType::Q3_K); }
GB_TEST(dequantize_q4_k_bit_exact) { check_type(WeightType::Q4_K); }
GB_TEST(dequantize_q5_k_bit_exact) { check_type(WeightType::Q5_K); }
GB_TEST(dequantize_q6_k_bit_exact) { check_type(WeightType::Q6_K); }
GB_TEST(dequantize_iq4_nl_bit_exact) { check_type(WeightType::IQ4_NL); }
GB_TEST(dequantize_iq4_xs_bit_exact) { check_type(WeightType::IQ4_XS); }

GB_TEST(traits_table_matches_gguf_codes_and_names) {
  // Codes and block geometry from the GGUF specification.
  struct Want { const char* name; uint32_t code; int32_t elems, bytes; };
  for (const Want& w : {Want{"F32", 0, 1, 4}, {"F16", 1, 1, 2}, {"BF16", 30, 1, 2}, {"Q4_0", 2, 32, 18},
                        {"Q4_1", 3, 32, 20}, {"Q5_0", 6, 32, 22}, {"Q5_1", 7, 32, 24}, {"Q8_0", 8, 32, 34},
                        {"Q2_K", 10, 256, 84}, {"Q3_K", 11, 256, 110}, {"Q4_K", 12, 256, 144},
                        {"Q5_K", 13, 256, 176}, {"Q6_K", 14, 256, 210}, {"IQ4_NL", 20, 32, 18},
                        {"IQ4_XS", 23, 256, 136}, {"MXFP4", 39, 32, 17}}) {
    const auto t = gb::kernels::weight_type_from_gguf(w.code);
    QVERIFY2(t.has_value(), w.name);
    const auto& tr = gb::kernels::weight_traits(*t);
    QCOMPARE(std::string(tr.name), std::string(w.name));
    QCOMPARE(tr.block_elements, w.elems);
    QCOMPARE(tr.block_bytes, w.bytes);
    QVERIFY(gb::kernels::weight_type_from_name(w.name) == t);
  }
  for (uint32_t unsupported : {16u, 17u, 18u, 19u, 21u, 22u, 29u, 34u, 35u, 40u})
    QVERIFY(!gb::kernels::weight_type_from_gguf(unsupported).has_value());
  QCOMPARE(std::string(gb::kernels::ggml_type_name(34)), std::string("TQ1_0"));
}
