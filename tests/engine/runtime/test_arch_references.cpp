// Architecture references: tiny-llama3 (llama, Llama-3.1 rope scaling through
// rope_freqs, tied output) and tiny-qwen2 (qwen2: q/k/v biases, NeoX RoPE), each
// with a float32 reference from HF transformers run on the file's own weights
// (../shared/models/tiny-*/README.md). Prompt ids (chat prompts with
// parse_special), all 24 greedy tokens, and the top-20 logits of every greedy step
// within 1e-3, through the Engine on the CPU backend.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "backend/backend.h"
#include "gb_test.h"
#include "model/model.h"
#include "runtime/engine.h"
#include "tokenizer/tokenizer.h"
#include "../tokenizer/tokenizer_test_support.h"
#include "arch_ref_support.h"

// A namespace of its own: the folder's test files may share a unity batch.
namespace test_arch_references {

namespace {

using nlohmann::json;
using archref::compare_top;
using archref::run_greedy;
using archref::Step;

void check_reference(const std::string& name) {
  GB_REQUIRE_SHARED(model_path, "models/" + name + "/" + name + "-F16.gguf");
  GB_REQUIRE_SHARED(ref_path, "models/" + name + "/refs/" + name + "-F16.json");
  const json ref = gbtest::read_json(ref_path);
  gb::LoadOptions options;
  options.context_length = 256;
  auto model = gb::load_model(model_path, options);
  QVERIFY2(model.ok(), model.ok() ? "" : model.error().message.c_str());
  auto tokenizer = gb::load_tokenizer(**model, "");
  QVERIFY2(tokenizer.ok(), tokenizer.ok() ? "" : tokenizer.error().message.c_str());
  double worst_first = 0.0;
  for (const json& prompt : ref["prompts"]) {
    const std::string pname = prompt["name"].get<std::string>();
    const auto want_ids = gbtest::json_ids(prompt["ids"]);
    const auto ids = (*tokenizer)->encode(prompt["text"].get<std::string>(), gb::EncodeOptions{.parse_special = true});
    QVERIFY2(ids == want_ids, (pname + ": prompt ids " + gbtest::ids_text(ids)).c_str());
    std::string error;
    const auto want_greedy = gbtest::json_ids(prompt["greedy"]["ids"]);
    const std::vector<Step> steps =
        run_greedy(*model, *tokenizer, ids, static_cast<int>(want_greedy.size()), error);
    QVERIFY2(error.empty(), error.c_str());
    QCOMPARE(steps.size(), want_greedy.size());
    for (size_t k = 0; k < steps.size(); ++k) {
      QVERIFY2(steps[k].token == want_greedy[k],
               (pname + ": greedy token " + std::to_string(k) + " is " + std::to_string(steps[k].token) + ", want " +
                std::to_string(want_greedy[k]))
                   .c_str());
      const std::string diff = compare_top(steps[k].top, prompt["greedy"]["steps"][k]);
      QVERIFY2(diff.empty(), (pname + " step " + std::to_string(k) + ": " + diff).c_str());
    }
    const auto& first = prompt["greedy"]["steps"][0]["top_logits"];
    worst_first = std::max(worst_first, std::abs(steps[0].top[0].second - first[0].get<double>()));
  }
  std::printf("%s: all prompts match; |d top-1 logit| at step 0 <= %.2e\n", name.c_str(), worst_first);
}

}  // namespace

GB_TEST(tiny_llama3_matches_transformers) { check_reference("tiny-llama3"); }
GB_TEST(tiny_qwen2_matches_transformers) { check_reference("tiny-qwen2"); }

}  // namespace test_arch_references
