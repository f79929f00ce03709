// The layer recipe (see layer_recipe.h): ModelConfig fields -> steps.
#include "backend/layer_recipe.h"

#include <cstdio>
#include <tuple>
#include <utility>

namespace gb {
namespace {

RecipeStep step(RecipeOp op, Buf in, Buf out, WeightSlot weight, int32_t layer) {
  RecipeStep s;
  s.op = op;
  s.in = in;
  s.out = out;
  s.weight = weight;
  s.layer = layer;
  return s;
}

RecipeStep norm(Buf in, Buf out, WeightSlot weight, int32_t layer, float eps) {
  RecipeStep s = step(RecipeOp::Norm, in, out, weight, layer);
  s.value = eps;
  return s;
}

// RoPE of this layer: sliding layers use their own base (Gemma 3) and no linear scaling.
RopeSpec rope_spec(const ModelConfig& c, int32_t layer) {
  const bool sliding = c.is_sliding(layer);
  RopeSpec r;
  r.style = c.rope_style;
  r.rope_dim = c.rope_dim;
  r.base = sliding && c.rope_freq_base_swa > 0.0f ? c.rope_freq_base_swa : c.rope_freq_base;
  r.freq_scale = sliding ? 1.0f : c.rope_freq_scale;
  r.attn_factor = c.rope_attn_factor;
  r.freq_factors = c.rope_freq_factors;
  return r;
}

RecipeStep capture(Buf in, CapturePoint point, int32_t layer) {
  RecipeStep s = step(RecipeOp::Capture, in, Buf::None, WeightSlot::None, layer);
  s.capture = point;
  return s;
}

// Attention half: norm, q/k/v, biases, q/k norms, RoPE, KV write, attention,
// output projection, optional post-norm, residual; captures of the input
// residual, the query and the residual after the block.
void attention_half(const ModelConfig& c, int32_t l, std::vector<RecipeStep>& out) {
  out.push_back(capture(Buf::X, CapturePoint::LayerInput, l));
  out.push_back(norm(Buf::X, Buf::XB, WeightSlot::AttnNorm, l, c.rms_eps));
  RecipeStep qkv = step(RecipeOp::ProjectQkv, Buf::XB, Buf::None, c.fused_qkv ? WeightSlot::Wqkv : WeightSlot::None, l);
  qkv.fused = c.fused_qkv;
  out.push_back(qkv);
  if (c.qkv_bias) {
    out.push_back(step(RecipeOp::AddBias, Buf::None, Buf::Q, WeightSlot::Bq, l));
    out.push_back(step(RecipeOp::AddBias, Buf::None, Buf::K, WeightSlot::Bk, l));
    out.push_back(step(RecipeOp::AddBias, Buf::None, Buf::V, WeightSlot::Bv, l));
  }
  for (const auto& [buf, slot, heads] : {std::tuple{Buf::Q, WeightSlot::QNorm, c.num_heads},
                                         std::tuple{Buf::K, WeightSlot::KNorm, c.num_kv_heads}}) {
    if (!c.qk_norm) break;
    RecipeStep s = step(RecipeOp::HeadNorm, Buf::None, buf, slot, l);
    s.heads = heads;
    s.value = c.rms_eps;
    out.push_back(s);
  }
  for (const auto& [buf, heads] : {std::pair{Buf::Q, c.num_heads}, std::pair{Buf::K, c.num_kv_heads}}) {
    RecipeStep s = step(RecipeOp::Rope, Buf::None, buf, WeightSlot::None, l);
    s.heads = heads;
    s.rope = rope_spec(c, l);
    out.push_back(s);
  }
  out.push_back(capture(Buf::Q, CapturePoint::Query, l));
  out.push_back(step(RecipeOp::KvWrite, Buf::K, Buf::None, WeightSlot::None, l));
  RecipeStep att = step(RecipeOp::Attention, Buf::Q, Buf::Att, WeightSlot::None, l);
  att.attention = {c.attn_scale, c.attn_softcap, c.is_sliding(l) ? c.sliding_window : 0, c.attn_sinks};
  out.push_back(att);
  if (c.post_norms) {
    out.push_back(step(RecipeOp::Project, Buf::Att, Buf::Proj, WeightSlot::Wo, l));
    if (c.out_bias) out.push_back(step(RecipeOp::AddBias, Buf::None, Buf::Proj, WeightSlot::Bo, l));
    out.push_back(norm(Buf::Proj, Buf::Proj, WeightSlot::PostAttnNorm, l, c.rms_eps));
    out.push_back(step(RecipeOp::ResidualAdd, Buf::Proj, Buf::X, WeightSlot::None, l));
  } else {
    RecipeStep wo = step(RecipeOp::Project, Buf::Att, Buf::X, WeightSlot::Wo, l);
    wo.accumulate = true;
    out.push_back(wo);
    if (c.out_bias) out.push_back(step(RecipeOp::AddBias, Buf::None, Buf::X, WeightSlot::Bo, l));
  }
  out.push_back(capture(Buf::X, CapturePoint::AfterAttention, l));
}

// FFN half: norm, gate/up, gated activation, down, optional post-norm, residual
// (a mixture of experts: norm, the experts' step into the residual).
void ffn_half(const ModelConfig& c, int32_t l, std::vector<RecipeStep>& out) {
  out.push_back(norm(Buf::X, Buf::XB, WeightSlot::FfnNorm, l, c.rms_eps));
  if (c.is_moe()) {
    RecipeStep moe = step(RecipeOp::MoeFfn, Buf::XB, c.post_norms ? Buf::Proj : Buf::X, WeightSlot::Router, l);
    moe.heads = c.num_experts_used;
    moe.activation = c.activation;
    moe.accumulate = !c.post_norms;
    out.push_back(moe);
    if (c.post_norms) {
      out.push_back(norm(Buf::Proj, Buf::Proj, WeightSlot::PostFfnNorm, l, c.rms_eps));
      out.push_back(step(RecipeOp::ResidualAdd, Buf::Proj, Buf::X, WeightSlot::None, l));
    }
    out.push_back(capture(Buf::X, CapturePoint::LayerOutput, l));
    return;
  }
  RecipeStep gate_up = step(RecipeOp::ProjectGateUp, Buf::XB, Buf::None, c.fused_gate_up ? WeightSlot::WUp : WeightSlot::None, l);
  gate_up.fused = c.fused_gate_up;
  out.push_back(gate_up);
  RecipeStep act = step(RecipeOp::GatedActivation, Buf::None, Buf::Hidden, WeightSlot::None, l);
  act.activation = c.activation;
  out.push_back(act);
  if (c.post_norms) {
    out.push_back(step(RecipeOp::Project, Buf::Hidden, Buf::Proj, WeightSlot::WDown, l));
    out.push_back(norm(Buf::Proj, Buf::Proj, WeightSlot::PostFfnNorm, l, c.rms_eps));
    out.push_back(step(RecipeOp::ResidualAdd, Buf::Proj, Buf::X, WeightSlot::None, l));
  } else {
    RecipeStep down = step(RecipeOp::Project, Buf::Hidden, Buf::X, WeightSlot::WDown, l);
    down.accumulate = true;
    out.push_back(down);
  }
  out.push_back(capture(Buf::X, CapturePoint::LayerOutput, l));
}

}  // namespace

std::vector<RecipeStep> layer_recipe(const ModelConfig& c, int32_t layer) {
  std::vector<RecipeStep> steps;
  attention_half(c, layer, steps);
  ffn_half(c, layer, steps);
  return steps;
}

ModelRecipe model_recipe(const ModelConfig& c) {
  ModelRecipe r;
  r.prologue.push_back(step(RecipeOp::Embed, Buf::None, Buf::X, WeightSlot::TokenEmbedding, -1));
  if (c.embed_scale != 1.0f) {
    RecipeStep s = step(RecipeOp::Scale, Buf::None, Buf::X, WeightSlot::None, -1);
    s.value = c.embed_scale;
    r.prologue.push_back(s);
  }
  for (int32_t l = 0; l < c.num_layers; ++l) r.layers.push_back(layer_recipe(c, l));
  RecipeStep final_norm = step(RecipeOp::NormLogitRows, Buf::X, Buf::Final, WeightSlot::OutputNorm, -1);
  final_norm.value = c.rms_eps;
  r.epilogue.push_back(final_norm);
  r.epilogue.push_back(step(RecipeOp::Project, Buf::Final, Buf::Logits, WeightSlot::Classifier, -1));
  if (c.final_softcap > 0.0f) {
    RecipeStep s = step(RecipeOp::Softcap, Buf::None, Buf::Logits, WeightSlot::None, -1);
    s.value = c.final_softcap;
    r.epilogue.push_back(s);
  }
  return r;
}

std::string_view recipe_op_name(RecipeOp op) {
  static constexpr std::string_view names[kNumRecipeOps] = {
      "embed",   "scale",   "norm",      "norm_logit_rows", "project_qkv",     "add_bias",         "head_norm", "rope",
      "kv_write", "attention", "project", "project_gate_up", "gated_activation", "residual_add", "softcap",
      "capture", "moe_ffn"};
  return names[static_cast<int>(op)];
}

std::string_view capture_point_name(CapturePoint p) {
  static constexpr std::string_view names[kNumCapturePoints] = {"layer_input", "query", "after_attention",
                                                                "layer_output"};
  return names[static_cast<int>(p)];
}

std::string_view buf_name(Buf b) {
  static constexpr std::string_view names[] = {"-", "X", "XB", "Q", "K", "V", "Att", "Proj", "Hidden", "Final", "Logits"};
  return names[static_cast<int>(b)];
}

std::string_view weight_slot_name(WeightSlot w) {
  static constexpr std::string_view names[] = {
      "-",     "token_embd", "attn_norm", "attn_q",   "attn_k", "attn_v",         "attn_qkv",
      "bq",    "bk",         "bv",        "attn_q_norm", "attn_k_norm", "attn_output", "post_attention_norm",
      "ffn_norm", "ffn_gate", "ffn_up",   "ffn_down", "post_ffw_norm", "output_norm", "output", "ffn_gate_inp", "bo"};
  return names[static_cast<int>(w)];
}

std::string describe_step(const RecipeStep& s) {
  std::string d(recipe_op_name(s.op));
  // Appends one piece at a time: GCC 12 at -O3 warns (-Wrestrict, a false
  // positive) on `" " + std::string(...)` here once this file shares a unity
  // batch with others.
  const auto add = [&d](std::string_view piece) {
    d += ' ';
    d += piece;
  };
  if (s.in != Buf::None || s.out != Buf::None) {
    add(buf_name(s.in));
    d += "->";
    d += buf_name(s.out);
  }
  if (s.weight != WeightSlot::None) add(weight_slot_name(s.weight));
  if (s.fused) d += " fused";
  if (s.accumulate) d += " +=";
  char buf[192];
  switch (s.op) {
    case RecipeOp::Norm: case RecipeOp::NormLogitRows: case RecipeOp::HeadNorm:
      std::snprintf(buf, sizeof buf, " eps %g", static_cast<double>(s.value));
      d += buf;
      break;
    case RecipeOp::Scale: case RecipeOp::Softcap:
      std::snprintf(buf, sizeof buf, " %g", static_cast<double>(s.value));
      d += buf;
      break;
    case RecipeOp::Rope:
      std::snprintf(buf, sizeof buf, " %s dim %d base %g scale %g attn %g%s",
                    s.rope.style == RopeStyle::NeoX ? "neox" : "adjacent", s.rope.rope_dim,
                    static_cast<double>(s.rope.base), static_cast<double>(s.rope.freq_scale),
                    static_cast<double>(s.rope.attn_factor), s.rope.freq_factors ? " factors" : "");
      d += buf;
      break;
    case RecipeOp::Attention:
      std::snprintf(buf, sizeof buf, " scale %g softcap %g window %d%s", static_cast<double>(s.attention.scale),
                    static_cast<double>(s.attention.softcap), s.attention.window, s.attention.sinks ? " sinks" : "");
      d += buf;
      break;
    case RecipeOp::GatedActivation:
      add(ffn_activation_names(s.activation).recipe);
      break;
    case RecipeOp::MoeFfn:
      add("top");
      add(std::to_string(s.heads));
      add(ffn_activation_names(s.activation).recipe);
      break;
    case RecipeOp::Capture:
      add(capture_point_name(s.capture));
      break;
    default: break;
  }
  return d;
}

Status run_steps(std::span<const RecipeStep> steps, LayerOps& ops) {
  for (const RecipeStep& s : steps) {
    switch (s.op) {
      case RecipeOp::Embed: GB_TRY(ops.embed(s)); break;
      case RecipeOp::Scale: GB_TRY(ops.scale(s)); break;
      case RecipeOp::Norm: GB_TRY(ops.norm(s)); break;
      case RecipeOp::NormLogitRows: GB_TRY(ops.norm_logit_rows(s)); break;
      case RecipeOp::ProjectQkv: GB_TRY(ops.project_qkv(s)); break;
      case RecipeOp::AddBias: GB_TRY(ops.add_bias(s)); break;
      case RecipeOp::HeadNorm: GB_TRY(ops.head_norm(s)); break;
      case RecipeOp::Rope: GB_TRY(ops.rope(s)); break;
      case RecipeOp::KvWrite: GB_TRY(ops.kv_write(s)); break;
      case RecipeOp::Attention: GB_TRY(ops.attention(s)); break;
      case RecipeOp::Project: GB_TRY(ops.project(s)); break;
      case RecipeOp::ProjectGateUp: GB_TRY(ops.project_gate_up(s)); break;
      case RecipeOp::GatedActivation: GB_TRY(ops.gated_activation(s)); break;
      case RecipeOp::ResidualAdd: GB_TRY(ops.residual_add(s)); break;
      case RecipeOp::Softcap: GB_TRY(ops.softcap(s)); break;
      case RecipeOp::Capture: GB_TRY(ops.capture(s)); break;
      case RecipeOp::MoeFfn: GB_TRY(ops.moe_ffn(s)); break;
    }
  }
  return {};
}

}  // namespace gb
