// glassbox-cli quantize's engine side: the mixture rules reproduce the tensor
// types llama-quantize chose in ../shared/models/quant-llama (its README: the
// K_M mixtures inside the layers are llama-quantize's defaults; the tied
// output/embedding was forced to the base type there with
// --output-tensor-type, so it is left out of the comparison); a quantized
// file loads and runs; every type's quantizer round-trips Gaussian rows within
// its expected error; the NaN/Inf scale scan names the tensor and block.
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "backend/backend.h"
#include "gb_test.h"
#include "model/gguf_file.h"
#include "model/mapped_file.h"
#include "model/model.h"
#include "model/quantize_model.h"
#include "model/weight_report.h"
#include "runtime/make_backend.h"
#include "model_test_files.h"

namespace {

void check_plan_matches(const std::string& file_key, const std::string& type) {
  GB_REQUIRE_SHARED(src, "models/quant-llama/quant-llama-F16.gguf");
  GB_REQUIRE_SHARED(ref_path, "models/quant-llama/refs/quant-llama-" + file_key + ".json");
  std::ifstream in(ref_path);
  const nlohmann::json ref = nlohmann::json::parse(in);
  gb::QuantizeOptions o;
  o.type = type;
  auto plan = gb::plan_quantization(src, o);
  QVERIFY2(plan.ok(), plan.ok() ? "" : plan.error().message.c_str());
  int compared = 0;
  for (const auto& [name, t] : *plan) {
    if (name == "token_embd.weight") continue;
    const std::string want = ref["tensor_types"][name].get<std::string>();
    QVERIFY2(want == std::string(gb::dtype_info(t).name),
             (type + " " + name + ": ours " + std::string(gb::dtype_info(t).name) + ", llama-quantize " + want).c_str());
    ++compared;
  }
  QCOMPARE(compared, 37);
}

// The converted mixture's logits (512) after six fixed tokens, one CPU forward;
// empty when the backend fails.
std::vector<float> six_token_logits(const std::shared_ptr<const gb::Model>& m) {
  auto made = gb::make_backend(m, {gb::Device::Cpu, 0});
  if (!made.ok() || !(*made)->init_kv_pool({4, 16}).ok()) return {};
  gb::BatchLayout batch;
  const std::vector<gb::TokenId> ids = {1, 300, 41, 77, 205, 9};
  const std::vector<int32_t> table = {0, 1, 2, 3};
  batch.add_sequence(ids.data(), 6, 0, table.data(), 4, false);
  std::vector<float> logits(512);
  if (!(*made)->forward(batch, logits).ok()) return {};
  return logits;
}

// The quantized model's logits after six_token_logits' tokens are within
// `fraction` of the F16 model's logit spread, with the same top token.
void check_close_to_f16(const std::shared_ptr<const gb::Model>& f16, const std::shared_ptr<const gb::Model>& quantized,
                        double fraction, const char* what) {
  const std::vector<float> a = six_token_logits(f16), b = six_token_logits(quantized);
  QVERIFY(!a.empty() && b.size() == a.size());
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::abs(a[i] - b[i])));
  const auto [lo, hi] = std::minmax_element(a.begin(), a.end());
  const double spread = *hi - *lo;
  std::printf("%s: largest logit difference %.4f of a spread of %.4f\n", what, worst, spread);
  QVERIFY2(worst < fraction * spread, (std::string(what) + ": " + std::to_string(worst) + " of " + std::to_string(spread)).c_str());
  QCOMPARE(std::max_element(a.begin(), a.end()) - a.begin(), std::max_element(b.begin(), b.end()) - b.begin());
}

}  // namespace

GB_TEST(mixture_rules_match_llama_quantize) {
  check_plan_matches("Q4_K_M", "Q4_K_M");
  check_plan_matches("Q5_K_M", "Q5_K_M");
  check_plan_matches("Q3_K_M", "Q3_K_M");
  check_plan_matches("Q2_K", "Q2_K");
  check_plan_matches("IQ4_XS", "IQ4_XS");
  check_plan_matches("Q6_K", "Q6_K");
}

GB_TEST(tied_output_gets_q6_k_and_pure_keeps_one_type) {
  GB_REQUIRE_SHARED(src, "models/quant-llama/quant-llama-F16.gguf");
  gb::QuantizeOptions o;
  o.type = "Q4_0";
  auto plan = gb::plan_quantization(src, o);
  QVERIFY(plan.ok());
  QVERIFY(plan->front().first == "token_embd.weight" && plan->front().second == gb::WeightType::Q6_K);
  o.pure = true;
  plan = gb::plan_quantization(src, o);
  for (const auto& [name, t] : *plan) QVERIFY2(t == gb::WeightType::Q4_0 || t == gb::WeightType::F32, name.c_str());
  o.type = "Q7_X";
  QVERIFY(!gb::plan_quantization(src, o).ok());
}

GB_TEST(quantized_file_loads_and_runs) {
  GB_REQUIRE_SHARED(src, "models/quant-llama/quant-llama-F16.gguf");
  const std::string out = gbtest::temp_dir() + "/ql-q4km.gguf";
  gb::QuantizeOptions o;
  o.type = "Q4_K_M";
  auto report = gb::quantize_model(src, out, o);
  QVERIFY2(report.ok(), report.ok() ? "" : report.error().message.c_str());
  QVERIFY(!std::ifstream(out + ".partial").good());  // renamed when complete
  for (const auto& t : *report)
    if (t.from != t.to) {
      // Relative RMSE of 4- and 6-bit codes on Gaussian-like weights.
      const double rel = t.rmse / t.source_rms;
      QVERIFY2(rel < (t.to == gb::WeightType::Q6_K ? 0.03 : 0.1), (t.name + " " + std::to_string(rel)).c_str());
    }
  gb::LoadOptions load;
  load.check_tensors = true;
  auto m = gb::load_model(out, load);
  QVERIFY2(m.ok(), m.ok() ? "" : m.error().message.c_str());
  QCOMPARE(gb::weight_type_label(**m).substr(0, 8), std::string("Q4_K_M, "));
  auto made = gb::make_backend(*m, {gb::Device::Cpu, 0});
  QVERIFY(made.ok());
  gb::Backend& backend = **made;
  QVERIFY(backend.init_kv_pool({4, 16}).ok());
  gb::BatchLayout batch;
  const std::vector<gb::TokenId> ids = {1, 9038, 2501, 263, 931};
  const std::vector<int32_t> table = {0, 1, 2, 3};
  batch.add_sequence(ids.data(), 5, 0, table.data(), 4, false);
  std::vector<float> logits(32000);
  QVERIFY(backend.forward(batch, logits).ok());
  for (float v : logits) QVERIFY(std::isfinite(v));
}

// A mixture of experts (the converted Qwen3-MoE file): the 3-D expert stacks
// are quantized row by row (ffn_down_exps under the ffn_down rule), the router
// stays float32, and the Q8_0 file gives the F16 file's greedy tokens.
GB_TEST(mixture_of_experts_quantizes_the_experts_not_the_router) {
  const std::string src = std::string(GLASSBOX_CONVERTED_REF_DIR) + "/qwen3moe.gguf";
  const std::string out = gbtest::temp_dir() + "/qwen3moe-q8.gguf";
  gb::QuantizeOptions o;
  o.type = "Q8_0";
  auto report = gb::quantize_model(src, out, o);
  QVERIFY2(report.ok(), report.ok() ? "" : report.error().message.c_str());
  int experts = 0;
  for (const auto& t : *report) {
    if (t.name.find("_exps.weight") != std::string::npos) {
      QVERIFY2(t.to == gb::WeightType::Q8_0, t.name.c_str());
      ++experts;
    }
    if (t.name.find("ffn_gate_inp") != std::string::npos) QVERIFY2(t.to == gb::WeightType::F32, t.name.c_str());
  }
  QCOMPARE(experts, 6);
  o.type = "Q4_K_M";
  auto plan = gb::plan_quantization(src, o);
  QVERIFY(plan.ok());
  for (const auto& [name, t] : *plan)
    if (name.find("ffn_down_exps") != std::string::npos) QVERIFY2(t != gb::WeightType::Q4_K, name.c_str());  // the ffn_down rule
  auto f16 = gb::load_model(src);
  auto q8 = gb::load_model(out);
  QVERIFY(f16.ok() && q8.ok());
  QCOMPARE((*q8)->weights.layers[0].gate_exps.dtype, gb::WeightType::Q8_0);
  // Q8_0 everywhere but the norms and the router: within 3% of the logits' spread.
  check_close_to_f16(*f16, *q8, 0.03, "Q8_0");
}

// MXFP4_MOE (llama-quantize's ftype 38, what gpt-oss ships in): the experts'
// stacks in MXFP4, every other matrix -- the output and the embedding too --
// in Q8_0, the router and the norms as they are (llama.cpp's
// llama_tensor_get_type_impl); --pure puts every matrix in MXFP4. The file
// loads with its scales scanned, is labelled MXFP4_MOE, and runs within a
// tenth of the F16 file's logit spread with the same top token; an E8M0 NaN
// exponent (0xFF) in an expert block is named by the scan.
GB_TEST(mxfp4_moe_quantizes_the_experts_to_mxfp4_and_the_rest_to_q8_0) {
  const std::string src = std::string(GLASSBOX_CONVERTED_REF_DIR) + "/qwen3moe.gguf";
  gb::QuantizeOptions o;
  o.type = "mxfp4_moe";
  auto plan = gb::plan_quantization(src, o);
  QVERIFY2(plan.ok(), plan.ok() ? "" : plan.error().message.c_str());
  int experts = 0, q8 = 0;
  for (const auto& [name, t] : *plan) {
    const std::string what = name + " " + std::string(gb::dtype_info(t).name);
    if (name.find("_exps.weight") != std::string::npos) {
      QVERIFY2(t == gb::WeightType::MXFP4, what.c_str());
      ++experts;
    } else if (name.find("ffn_gate_inp") != std::string::npos || name.find("norm") != std::string::npos) {
      QVERIFY2(t == gb::WeightType::F32, what.c_str());
    } else {
      QVERIFY2(t == gb::WeightType::Q8_0, what.c_str());  // attention, output.weight, token_embd.weight
      ++q8;
    }
  }
  QCOMPARE(experts, 6);
  QCOMPARE(q8, 10);
  o.pure = true;
  plan = gb::plan_quantization(src, o);
  QVERIFY(plan.ok());
  for (const auto& [name, t] : *plan) QVERIFY2(t == gb::WeightType::MXFP4 || t == gb::WeightType::F32, name.c_str());

  o.pure = false;
  const std::string out = gbtest::temp_dir() + "/qwen3moe-mxfp4.gguf";
  auto report = gb::quantize_model(src, out, o);
  QVERIFY2(report.ok(), report.ok() ? "" : report.error().message.c_str());
  for (const auto& t : *report)
    if (t.to == gb::WeightType::MXFP4)  // 8 to 16 steps per block maximum: about 0.1 of the rms on these weights
      QVERIFY2(t.rmse < 0.2 * t.source_rms, (t.name + " " + std::to_string(t.rmse / t.source_rms)).c_str());
  gb::LoadOptions load;
  load.check_tensors = true;
  auto f16 = gb::load_model(src);
  auto mx = gb::load_model(out, load);
  QVERIFY2(f16.ok() && mx.ok(), mx.ok() ? "" : mx.error().message.c_str());
  QCOMPARE((*mx)->weights.layers[1].down_exps.dtype, gb::WeightType::MXFP4);
  QCOMPARE(gb::weight_type_label(**mx).substr(0, 11), std::string("MXFP4_MOE, "));
  check_close_to_f16(*f16, *mx, 0.1, "MXFP4_MOE");

  auto bytes = gbtest::read_bytes(out);
  size_t at = 0;
  {
    auto f = gb::GgufFile::open(out);
    QVERIFY(f.ok());
    const gb::GgufTensorInfo* t = f->find_tensor("blk.1.ffn_up_exps.weight");
    QVERIFY(t != nullptr && t->dtype == gb::WeightType::MXFP4);
    at = static_cast<size_t>(f->tensor_data(*t) - f->file()->data());
  }
  gbtest::poke<uint8_t>(bytes, at + 70 * 17, 0xFE);  // the largest finite exponent: accepted
  QVERIFY(gb::load_model(gbtest::write_bytes("mxfp4-fe.gguf", bytes), load).ok());
  gbtest::poke<uint8_t>(bytes, at + 70 * 17, 0xFF);  // block 70's exponent: E8M0's NaN
  auto bad = gb::load_model(gbtest::write_bytes("mxfp4-nan.gguf", bytes), load);
  QVERIFY(!bad.ok());
  QVERIFY2(bad.error().message.find("tensor blk.1.ffn_up_exps.weight (MXFP4) has a NaN or infinite scale in block 70 of "
                                    "256 (row 70)") != std::string::npos,
           bad.error().message.c_str());
}

// A dense model under MXFP4_MOE has no experts: every matrix is Q8_0, the tied
// embedding too (rows of 256 values, where a K-type would not fall back).
GB_TEST(mxfp4_moe_on_a_dense_model_is_q8_0) {
  GB_REQUIRE_SHARED(src, "models/quant-llama/quant-llama-F16.gguf");
  gb::QuantizeOptions o;
  o.type = "MXFP4_MOE";
  auto plan = gb::plan_quantization(src, o);
  QVERIFY(plan.ok());
  int q8 = 0;
  for (const auto& [name, t] : *plan) {
    QVERIFY2(t == (name.find("norm") != std::string::npos ? gb::WeightType::F32 : gb::WeightType::Q8_0), name.c_str());
    q8 += t == gb::WeightType::Q8_0;
  }
  QCOMPARE(q8, 29);  // 4 layers x 7 matrices and the embedding
}

GB_TEST(every_quantizer_round_trips_gaussian_rows) {
  // Relative RMSE bounds of each code width on N(0,1) data (the quantizers'
  // search should land well inside them; these catch layout/packing slips,
  // which give errors of order 1).
  const std::map<gb::WeightType, double> bound = {
      {gb::WeightType::Q8_0, 0.006}, {gb::WeightType::Q6_K, 0.02}, {gb::WeightType::Q5_0, 0.045}, {gb::WeightType::Q5_1, 0.04},
      {gb::WeightType::Q5_K, 0.04},  {gb::WeightType::Q4_0, 0.09}, {gb::WeightType::Q4_1, 0.085}, {gb::WeightType::Q4_K, 0.085},
      {gb::WeightType::IQ4_NL, 0.085}, {gb::WeightType::IQ4_XS, 0.09}, {gb::WeightType::Q3_K, 0.19}, {gb::WeightType::Q2_K, 0.38},
      {gb::WeightType::MXFP4, 0.15}};  // no scale search: the block maximum sits at 8 to 16 steps, saturating past 12
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(4096), back(4096);
  for (auto& v : x) v = d(rng);
  for (const auto& [type, limit] : bound) {
    const auto& tr = gb::kernels::weight_traits(type);
    std::vector<uint8_t> q(*gb::dtype_bytes(type, x.size()));
    tr.quantize_row(x.data(), q.data(), static_cast<int64_t>(x.size()));
    tr.dequantize_row(q.data(), back.data(), static_cast<int64_t>(x.size()));
    double err = 0;
    for (size_t i = 0; i < x.size(); ++i) err += std::pow(static_cast<double>(back[i]) - x[i], 2);
    const double rel = std::sqrt(err / static_cast<double>(x.size()));
    std::printf("%-7s relative rmse %.4f\n", std::string(tr.name).c_str(), rel);
    QVERIFY2(rel < limit, (std::string(tr.name) + " " + std::to_string(rel)).c_str());
  }
}

GB_TEST(check_tensors_names_the_first_nan_scale) {
  GB_REQUIRE_SHARED(src, "models/quant-llama/quant-llama-Q4_0.gguf");
  auto bytes = gbtest::read_bytes(src);
  size_t at = 0;
  {
    auto f = gb::GgufFile::open(src);
    QVERIFY(f.ok());
    const gb::GgufTensorInfo* t = f->find_tensor("blk.1.attn_q.weight");
    QVERIFY(t != nullptr);
    at = static_cast<size_t>(f->tensor_data(*t) - f->file()->data());
  }
  gbtest::poke<uint16_t>(bytes, at + 3 * 18, 0x7e00);  // block 3's d: an f16 NaN
  const std::string bad = gbtest::write_bytes("nan-scale.gguf", bytes);
  QVERIFY(gb::load_model(bad).ok());  // not scanned unless asked
  gb::LoadOptions load;
  load.check_tensors = true;
  auto m = gb::load_model(bad, load);
  QVERIFY(!m.ok());
  QVERIFY2(m.error().message.find("tensor blk.1.attn_q.weight (Q4_0) has a NaN or infinite scale in block 3 of 2048 (row 0)") !=
               std::string::npos,
           m.error().message.c_str());
}

// read_weight_summary (header and tensor infos only) against gguf-py's tensor
// types in each quant-llama reference, and against the loaded model's table and
// label; a llama2.c file is labelled as such; a broken file is an error.
GB_TEST(header_only_summary_matches_gguf_py_and_loaded_model) {
  for (const char* key : {"F16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M",
                          "Q6_K", "IQ4_NL", "IQ4_XS", "untied-Q4_K_M"}) {
    GB_REQUIRE_SHARED(path, std::string("models/quant-llama/quant-llama-") + key + ".gguf");
    GB_REQUIRE_SHARED(ref_path, std::string("models/quant-llama/refs/quant-llama-") + key + ".json");
    std::ifstream in(ref_path);
    const nlohmann::json ref = nlohmann::json::parse(in);
    std::map<std::string, int> want;
    for (const auto& [name, type] : ref["tensor_types"].items()) ++want[type.get<std::string>()];
    auto s = gb::read_weight_summary(path);
    QVERIFY2(s.ok(), s.ok() ? "" : s.error().message.c_str());
    std::map<std::string, int> got;
    for (const gb::WeightTypeRow& r : s->types) got[std::string(gb::dtype_info(r.type).name)] = r.num_tensors;
    QVERIFY2(got == want, key);
    std::string mix = key;
    if (mix.rfind("untied-", 0) == 0) mix = mix.substr(7);
    QVERIFY2(s->label.rfind(mix + ", ", 0) == 0, (std::string(key) + ": " + s->label).c_str());
    auto m = gb::load_model(path);
    QVERIFY2(m.ok(), m.ok() ? "" : m.error().message.c_str());
    QCOMPARE(s->label, gb::weight_type_label(**m));
    QCOMPARE(s->num_bytes, static_cast<uint64_t>((*m)->weight_bytes()));
    QCOMPARE(s->num_values, (*m)->num_parameters());
  }
  GB_REQUIRE_SHARED(stories, "models/stories260K/stories260K.bin");
  auto s = gb::read_weight_summary(stories);
  QVERIFY2(s.ok(), s.ok() ? "" : s.error().message.c_str());
  QCOMPARE(s->label, std::string("F32 (llama2.c)"));
  const std::string junk = gbtest::temp_dir() + "/junk.gguf";
  std::ofstream(junk, std::ios::binary) << "GGUF\x03";
  QVERIFY(!gb::read_weight_summary(junk).ok());
  QVERIFY(!gb::read_weight_summary(gbtest::temp_dir() + "/no-such-file.gguf").ok());
}
