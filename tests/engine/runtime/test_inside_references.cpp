// Engine::inspect against transformers (tests/data/inside, made by
// tools/make_inside_refs.py from float32 HF models with eager attention and
// forward hooks; README there): for every model (tiny-llama3, tiny-qwen2,
// quant-llama F16, and the synth qwen3, mistral, gemma2, gemma3, phi3), every
// prompt and position of the reference, with F32 K/V:
//  - the attention weights of every head over the positions the layer sees
//    agree within 1e-4, and the reference is 0 exactly where our window starts
//    later (the window rule: W positions, the query's own included);
//  - the residuals entering and leaving each layer agree within 1e-4 (relative
//    to the vector's largest value);
//  - each layer's logit-lens top-5 and the model's top-5 are the same ids
//    (a swap is allowed only between logits within 1e-4 of each other).
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "backend/cpu_backend.h"
#include "core/sha256.h"
#include "gb_test.h"
#include "model/model.h"
#include "model/synthetic_model.h"
#include "runtime/engine.h"
#include "runtime/inside.h"
#include "tokenizer/tokenizer.h"
#include "../tokenizer/tokenizer_test_support.h"

namespace test_inside_references {
namespace {

using nlohmann::json;

constexpr double kTolerance = 1e-4;

std::string model_path(const json& ref) {
  const json& src = ref["source"];
  if (src.contains("gguf")) return gbtest::shared_dir() + "/" + src["gguf"].get<std::string>();
  const std::string name = ref["name"].get<std::string>();
  const std::string path = gbtest::temp_dir() + "/inside-ref-" + name + ".gguf";
  const gb::SyntheticArch* arch = gb::find_synthetic_arch(name);
  GB_CHECK_MSG(arch != nullptr, "synth does not know the reference's arch");
  GB_CHECK(gb::write_synthetic_arch_model(*arch, src["seed"].get<uint64_t>(), path).ok());
  return path;
}

// Top-k ids equal, except that neighbours whose logits are within the
// tolerance may come in either order.
bool same_top(const std::vector<gb::InsideTop>& mine, const std::vector<float>& logits, const json& ref) {
  const auto ids = ref["ids"].get<std::vector<int32_t>>();
  const auto ref_logits = ref["logits"].get<std::vector<double>>();
  if (mine.size() != ids.size()) return false;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (mine[i].id == ids[i]) continue;
    // A tie: our token's logit in the reference's neighbourhood.
    const double ours = logits[static_cast<size_t>(mine[i].id)];
    if (std::abs(ours - ref_logits[i]) > kTolerance * std::max(1.0, std::abs(ref_logits[i]))) return false;
  }
  return true;
}

double max_rel_error(const std::vector<float>& mine, const json& ref) {
  const auto r = ref.get<std::vector<double>>();
  if (r.size() != mine.size()) return INFINITY;
  double scale = 1.0, err = 0.0;
  for (double v : r) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < r.size(); ++i) err = std::max(err, std::abs(mine[i] - r[i]));
  return err / scale;
}

}  // namespace

GB_TEST(inside_matches_transformers_attention_residuals_and_lens) {
  const std::string dir = std::string(GLASSBOX_INSIDE_REF_DIR);
  int num_files = 0, num_positions = 0, num_cut_rows = 0;
  double worst_attention = 0.0, worst_residual = 0.0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    const json ref = gbtest::read_json(entry.path().string());
    QCOMPARE(ref["schema"].get<std::string>(), std::string("glassbox-inside-ref-v1"));
    const std::string name = ref["name"].get<std::string>();
    const std::string path = model_path(ref);
    auto sha = gb::sha256_file_hex(path);
    QVERIFY2(sha.ok() && *sha == ref["source"]["sha256"].get<std::string>(),
             (name + ": the model file differs from the one the reference was made from").c_str());
    gb::LoadOptions lo;
    lo.context_length = 256;
    auto model = gb::load_model(path, lo);
    QVERIFY2(model.ok(), model.ok() ? "" : model.error().message.c_str());
    auto tokenizer = gb::load_tokenizer(**model, "");
    QVERIFY(tokenizer.ok());
    gb::EngineConfig config;
    config.kv_types = {gb::WeightType::F32, gb::WeightType::F32};  // transformers' float32 arithmetic
    config.max_seqs = 1;
    config.max_context = 256;
    gb::Engine engine(*model, *tokenizer, gb::make_cpu_backend(*model), config);
    QVERIFY(engine.start().ok());
    QCOMPARE((*model)->config.num_layers, ref["num_layers"].get<int32_t>());
    ++num_files;
    for (const json& prompt : ref["prompts"]) {
      const auto ids = prompt["ids"].get<std::vector<gb::TokenId>>();
      for (const json& pos : prompt["positions"]) {
        const int32_t p = pos["position"].get<int32_t>();
        const std::string at = name + " " + prompt["name"].get<std::string>() + " position " + std::to_string(p);
        gb::InsideOptions o;
        o.residuals = true;
        auto r = engine.inspect(ids, p, o);
        QVERIFY2(r.ok(), (at + ": " + (r.ok() ? "" : r.error().message)).c_str());
        ++num_positions;
        QVERIFY2(same_top(r->final_top, r->logits, pos["logits_top"]), (at + ": final top-5").c_str());
        for (const json& lref : pos["layers"]) {
          const auto l = lref["layer"].get<size_t>();
          const gb::InsideLayer& mine = r->layers[l];
          const std::string where = at + " layer " + std::to_string(l);
          QCOMPARE(mine.first_position, lref["first_position"].get<int32_t>());
          num_cut_rows += mine.first_position > 0;
          const json& rows = lref["attention"];
          QCOMPARE(mine.attention.size(), rows.size());
          for (size_t h = 0; h < rows.size(); ++h) {
            const auto row = rows[h].get<std::vector<double>>();
            QCOMPARE(row.size(), static_cast<size_t>(p) + 1);
            for (int32_t k = 0; k <= p; ++k) {
              const double want = row[static_cast<size_t>(k)];
              const double got = k < mine.first_position ? 0.0 : mine.attention[h][static_cast<size_t>(k - mine.first_position)];
              worst_attention = std::max(worst_attention, std::abs(got - want));
              QVERIFY2(std::abs(got - want) <= kTolerance,
                       (where + " head " + std::to_string(h) + " key " + std::to_string(k) + ": " +
                        std::to_string(got) + " vs " + std::to_string(want)).c_str());
            }
          }
          const double in_err = max_rel_error(mine.residual_in, lref["residual_in"]);
          const double out_err = max_rel_error(mine.residual_out, lref["residual_out"]);
          worst_residual = std::max({worst_residual, in_err, out_err});
          QVERIFY2(in_err <= kTolerance && out_err <= kTolerance,
                   (where + ": residual error " + std::to_string(std::max(in_err, out_err))).c_str());
          // The lens of the layer: our top-5 against the reference's.
          QVERIFY2(mine.lens_top.size() == 5, where.c_str());
          const auto lens_ids = lref["lens_top"]["ids"].get<std::vector<int32_t>>();
          for (size_t i = 0; i < lens_ids.size(); ++i)
            if (mine.lens_top[i].id != lens_ids[i]) {
              const double a = lref["lens_top"]["logits"][i].get<double>();
              const double b = lref["lens_top"]["logits"][std::min(i + 1, lens_ids.size() - 1)].get<double>();
              const double c = lref["lens_top"]["logits"][i > 0 ? i - 1 : 0].get<double>();
              QVERIFY2(std::abs(a - b) <= kTolerance * std::max(1.0, std::abs(a)) ||
                           std::abs(a - c) <= kTolerance * std::max(1.0, std::abs(a)),
                       (where + ": lens top-5 differ at rank " + std::to_string(i)).c_str());
            }
        }
      }
    }
  }
  QCOMPARE(num_files, 8);
  QVERIFY(num_cut_rows > 0);
  qInfo("%d files, %d positions, %d rows cut by a window; worst attention error %.2e, worst residual error %.2e",
        num_files, num_positions, num_cut_rows, worst_attention, worst_residual);
}

}  // namespace test_inside_references
