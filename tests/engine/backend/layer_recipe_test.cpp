// The layer recipe for each architecture row: the configs come from the real
// loader (synthetic GGUF files written by `synth`'s writers, or a config made
// from the qwen2 table row), and each recipe must list exactly the steps the
// architecture's block has: llama's plain block, qwen2's biases, qwen3's q/k
// norms, gemma2's post-norms, soft-caps, GELU and alternating windows, gemma3's
// local/global RoPE bases, phi3's fused matrices and LongRoPE.
#include <string>
#include <vector>

#include "backend/layer_recipe.h"
#include "gb_test.h"
#include "model/architecture.h"
#include "model/model.h"
#include "model/synthetic_model.h"

namespace {

gb::ModelConfig arch_config(const char* name) {
  const std::string path = gbtest::temp_dir() + "/recipe-" + name + ".gguf";
  GB_CHECK(gb::write_synthetic_arch_model(*gb::find_synthetic_arch(name), 1, path).ok());
  auto model = gb::load_model(path);
  GB_CHECK_MSG(model.ok(), model.ok() ? "" : model.error().message.c_str());
  return (*model)->config;
}

gb::ModelConfig llama_config() {
  gb::SyntheticSpec spec{*gb::find_synthetic_shape("stories260K"), gb::WeightType::F32, 3};
  const std::string path = gbtest::temp_dir() + "/recipe-llama.gguf";
  GB_CHECK(gb::write_synthetic_model(spec, path).ok());
  auto model = gb::load_model(path);
  GB_CHECK(model.ok());
  return (*model)->config;
}

// Op names of a step list, space separated, without the capture steps (see
// capture_steps_sit_at_the_residual_and_query_points).
std::string ops(const std::vector<gb::RecipeStep>& steps) {
  std::string s;
  for (const gb::RecipeStep& st : steps)
    if (st.op != gb::RecipeOp::Capture) s += (s.empty() ? "" : " ") + std::string(gb::recipe_op_name(st.op));
  return s;
}

const gb::RecipeStep& find(const std::vector<gb::RecipeStep>& steps, gb::RecipeOp op, gb::Buf out = gb::Buf::None) {
  for (const gb::RecipeStep& s : steps)
    if (s.op == op && (out == gb::Buf::None || s.out == out)) return s;
  GB_CHECK_MSG(false, "step not in the recipe");
  return steps.front();
}

const std::string kLlamaLayer =
    "norm project_qkv rope rope kv_write attention project norm project_gate_up gated_activation project";

}  // namespace

GB_TEST(llama_layer_is_the_plain_block_with_residuals_folded_into_the_projections) {
  const gb::ModelConfig c = llama_config();
  const gb::ModelRecipe r = gb::model_recipe(c);
  QCOMPARE(ops(r.prologue), std::string("embed"));
  QCOMPARE(ops(r.epilogue), std::string("norm_logit_rows project"));
  QCOMPARE(static_cast<int32_t>(r.layers.size()), c.num_layers);
  for (const auto& layer : r.layers) QCOMPARE(ops(layer), kLlamaLayer);
  const auto& l1 = r.layers[1];
  QCOMPARE(l1.front().layer, 1);
  QVERIFY(!find(l1, gb::RecipeOp::ProjectQkv).fused);
  QVERIFY(find(l1, gb::RecipeOp::Rope, gb::Buf::Q).rope.plain());
  QCOMPARE(find(l1, gb::RecipeOp::Rope, gb::Buf::Q).heads, c.num_heads);
  QCOMPARE(find(l1, gb::RecipeOp::Rope, gb::Buf::K).heads, c.num_kv_heads);
  QCOMPARE(find(l1, gb::RecipeOp::Attention).attention.window, 0);
  QCOMPARE(find(l1, gb::RecipeOp::Attention).attention.softcap, 0.0f);
  const gb::RecipeStep& wo = find(l1, gb::RecipeOp::Project, gb::Buf::X);
  QVERIFY(wo.accumulate);
  QVERIFY(wo.weight == gb::WeightSlot::Wo);
  QCOMPARE(find(l1, gb::RecipeOp::GatedActivation).activation, gb::FfnActivation::SiLU);
  QCOMPARE(gb::describe_step(l1[1]), std::string("norm X->XB attn_norm eps 1e-05"));  // after the layer_input capture
}

GB_TEST(qwen2_row_adds_q_k_v_biases_and_neox_rope) {
  const gb::ArchitectureSpec* row = gb::find_architecture("qwen2");
  QVERIFY(row != nullptr);
  gb::ModelConfig c;
  c.architecture = "qwen2";
  c.dim = 64, c.hidden_dim = 128, c.num_layers = 2, c.num_heads = 4, c.num_kv_heads = 2, c.head_dim = 16;
  c.rope_dim = 16;
  c.rope_style = row->rope_style;
  c.qkv_bias = row->qkv_bias;
  const auto steps = gb::layer_recipe(c, 0);
  QCOMPARE(ops(steps), std::string("norm project_qkv add_bias add_bias add_bias rope rope kv_write attention project "
                                   "norm project_gate_up gated_activation project"));
  QVERIFY(find(steps, gb::RecipeOp::AddBias, gb::Buf::Q).weight == gb::WeightSlot::Bq);
  QVERIFY(find(steps, gb::RecipeOp::AddBias, gb::Buf::K).weight == gb::WeightSlot::Bk);
  QVERIFY(find(steps, gb::RecipeOp::AddBias, gb::Buf::V).weight == gb::WeightSlot::Bv);
  QCOMPARE(find(steps, gb::RecipeOp::Rope).rope.style, gb::RopeStyle::NeoX);
}

GB_TEST(qwen3_has_per_head_q_k_norms_before_rope) {
  const gb::ModelConfig c = arch_config("qwen3");
  const auto steps = gb::layer_recipe(c, 1);
  QCOMPARE(ops(steps), std::string("norm project_qkv head_norm head_norm rope rope kv_write attention project norm "
                                   "project_gate_up gated_activation project"));
  const gb::RecipeStep& qn = find(steps, gb::RecipeOp::HeadNorm, gb::Buf::Q);
  QVERIFY(qn.weight == gb::WeightSlot::QNorm);
  QCOMPARE(qn.heads, c.num_heads);
  QCOMPARE(find(steps, gb::RecipeOp::HeadNorm, gb::Buf::K).heads, c.num_kv_heads);
  QCOMPARE(find(steps, gb::RecipeOp::Rope).rope.base, 1000000.0f);
}

GB_TEST(gemma2_has_post_norms_softcaps_gelu_scaled_embeddings_and_alternating_windows) {
  const gb::ModelConfig c = arch_config("gemma2");
  const gb::ModelRecipe r = gb::model_recipe(c);
  QCOMPARE(ops(r.prologue), std::string("embed scale"));
  QCOMPARE(r.prologue[1].value, c.embed_scale);
  QVERIFY(c.embed_scale > 1.0f);
  QCOMPARE(ops(r.epilogue), std::string("norm_logit_rows project softcap"));
  QCOMPARE(r.epilogue[2].value, 15.0f);
  const std::string layer = "norm project_qkv rope rope kv_write attention project norm residual_add norm "
                            "project_gate_up gated_activation project norm residual_add";
  for (int32_t l = 0; l < c.num_layers; ++l) {
    const auto& steps = r.layers[static_cast<size_t>(l)];
    QCOMPARE(ops(steps), layer);
    const gb::RecipeStep& att = find(steps, gb::RecipeOp::Attention);
    QCOMPARE(att.attention.softcap, 5.0f);
    QCOMPARE(att.attention.window, l % 2 == 0 ? 6 : 0);  // even layers slide
    QVERIFY(att.attention.scale > 0.0f);
    QVERIFY(find(steps, gb::RecipeOp::Project, gb::Buf::Proj).weight == gb::WeightSlot::Wo);
    QCOMPARE(find(steps, gb::RecipeOp::GatedActivation).activation, gb::FfnActivation::GeluTanh);
    QVERIFY(steps[9].weight == gb::WeightSlot::PostAttnNorm);  // counting the two capture steps before it
    QVERIFY(steps[16].weight == gb::WeightSlot::PostFfnNorm);
  }
}

GB_TEST(gemma3_slides_five_layers_of_six_with_their_own_rope_base) {
  const gb::ModelConfig c = arch_config("gemma3");
  const gb::ModelRecipe r = gb::model_recipe(c);
  QCOMPARE(ops(r.epilogue), std::string("norm_logit_rows project"));  // no final soft-cap in the file
  for (int32_t l = 0; l < c.num_layers; ++l) {
    const auto& steps = r.layers[static_cast<size_t>(l)];
    QVERIFY(ops(steps).find("head_norm head_norm rope rope") != std::string::npos);
    const bool global = l % 6 == 5;
    const gb::RopeSpec& rope = find(steps, gb::RecipeOp::Rope, gb::Buf::K).rope;
    QCOMPARE(find(steps, gb::RecipeOp::Attention).attention.window, global ? 0 : 6);
    QCOMPARE(rope.base, global ? 1000000.0f : 10000.0f);
    QCOMPARE(rope.freq_scale, global ? 1.0f / 8.0f : 1.0f);
  }
}

GB_TEST(phi3_uses_fused_qkv_and_gate_up_with_longrope) {
  const gb::ModelConfig c = arch_config("phi3");
  const auto steps = gb::layer_recipe(c, 0);
  QCOMPARE(ops(steps), kLlamaLayer);
  const gb::RecipeStep& qkv = find(steps, gb::RecipeOp::ProjectQkv);
  QVERIFY(qkv.fused);
  QVERIFY(qkv.weight == gb::WeightSlot::Wqkv);
  const gb::RecipeStep& gate_up = find(steps, gb::RecipeOp::ProjectGateUp);
  QVERIFY(gate_up.fused);
  QVERIFY(gate_up.weight == gb::WeightSlot::WUp);
  const gb::RopeSpec& rope = find(steps, gb::RecipeOp::Rope).rope;
  QCOMPARE(rope.style, gb::RopeStyle::NeoX);
  QVERIFY(rope.freq_factors);
  QVERIFY(rope.attn_factor != 1.0f);
}

GB_TEST(mistral_slides_every_layer) {
  const gb::ModelConfig c = arch_config("mistral");
  for (int32_t l = 0; l < c.num_layers; ++l) {
    const auto steps = gb::layer_recipe(c, l);
    QCOMPARE(ops(steps), kLlamaLayer);
    QCOMPARE(find(steps, gb::RecipeOp::Attention).attention.window, 8);
  }
}

// A mixture of experts (the converted Qwen3-MoE file, tests/data/converted):
// qwen3's attention half, then the FFN norm and one experts step that adds into
// the residual, with the file's experts per token and activation.
GB_TEST(qwen3moe_ffn_is_one_experts_step) {
  auto model = gb::load_model(std::string(GLASSBOX_CONVERTED_REF_DIR) + "/qwen3moe.gguf");
  QVERIFY2(model.ok(), model.ok() ? "" : model.error().message.c_str());
  const gb::ModelConfig& c = (*model)->config;
  for (int32_t l = 0; l < c.num_layers; ++l) {
    const auto steps = gb::layer_recipe(c, l);
    QCOMPARE(ops(steps), std::string("norm project_qkv head_norm head_norm rope rope kv_write attention project norm moe_ffn"));
    const gb::RecipeStep& moe = find(steps, gb::RecipeOp::MoeFfn);
    QVERIFY(moe.in == gb::Buf::XB && moe.out == gb::Buf::X && moe.accumulate && moe.weight == gb::WeightSlot::Router);
    QCOMPARE(moe.heads, 2);
    QVERIFY(moe.activation == gb::FfnActivation::SiLU);
    QCOMPARE(gb::describe_step(moe), std::string("moe_ffn XB->X ffn_gate_inp += top 2 silu"));
  }
}

GB_TEST(every_op_has_a_name) {
  for (int op = 0; op < gb::kNumRecipeOps; ++op)
    QVERIFY(!gb::recipe_op_name(static_cast<gb::RecipeOp>(op)).empty());
}

// Every layer of every architecture hands over, in this order: the residual
// entering it (before its first norm), the query after RoPE (before the KV
// write and the attention that reads it), the residual after the attention
// block's residual add and the residual leaving it (its last step).
GB_TEST(capture_steps_sit_at_the_residual_and_query_points) {
  std::vector<gb::ModelConfig> configs = {llama_config()};
  for (const char* name : {"qwen3", "mistral", "gemma2", "gemma3", "phi3"}) configs.push_back(arch_config(name));
  for (const gb::ModelConfig& c : configs) {
    for (int32_t l = 0; l < c.num_layers; ++l) {
      const auto steps = gb::layer_recipe(c, l);
      std::vector<size_t> at;
      for (size_t i = 0; i < steps.size(); ++i)
        if (steps[i].op == gb::RecipeOp::Capture) at.push_back(i);
      QCOMPARE(at.size(), size_t{4});
      const auto point = [&](size_t k) { return steps[at[k]].capture; };
      QCOMPARE(at[0], size_t{0});
      QVERIFY(point(0) == gb::CapturePoint::LayerInput && steps[at[0]].in == gb::Buf::X);
      QVERIFY(point(1) == gb::CapturePoint::Query && steps[at[1]].in == gb::Buf::Q);
      QVERIFY(steps[at[1] - 1].op == gb::RecipeOp::Rope && steps[at[1] + 1].op == gb::RecipeOp::KvWrite);
      QVERIFY(point(2) == gb::CapturePoint::AfterAttention && steps[at[2]].in == gb::Buf::X);
      // Right after the step that adds the attention block into X.
      const gb::RecipeStep& before = steps[at[2] - 1];
      QVERIFY(before.out == gb::Buf::X && (before.op == gb::RecipeOp::ResidualAdd || before.accumulate));
      QCOMPARE(steps[at[2] + 1].weight, gb::WeightSlot::FfnNorm);
      QVERIFY(point(3) == gb::CapturePoint::LayerOutput && at[3] == steps.size() - 1);
      for (size_t k : at) QCOMPARE(steps[k].layer, l);
    }
  }
  QCOMPARE(gb::describe_step(gb::layer_recipe(configs[0], 0).front()), std::string("capture X->- layer_input"));
}
