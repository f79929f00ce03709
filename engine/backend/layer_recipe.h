// The layer recipe: one decoder layer (and the model's first and last steps) as
// an ordered list of steps over a small fixed set of operations, made once from a
// ModelConfig. Every backend runs the same recipe through its own LayerOps (one
// virtual call per step per layer, never per element), so an architecture's
// block is written once, here, as data: the table row in engine/model/
// architecture.cpp sets ModelConfig fields, layer_recipe() turns them into steps.
//
// Buffers are named, not addressed: each backend maps a Buf to its own storage
// (the CPU keeps q/k/v apart, CUDA keeps them as strided views of one q|k|v row),
// and its rows are the step's tokens, except Final and Logits, which hold the
// logit rows only. The gate/up pair written by ProjectGateUp is the backend's own
// buffer, read only by the GatedActivation that follows.
//
// Immutable values; any thread may build or read a recipe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "model/model_config.h"

namespace gb {

// The operation set. Each is one LayerOps method.
enum class RecipeOp : uint8_t {
  Embed,            // out (tokens, dim) = rows of `weight` (the token embedding) for the step's tokens
  Scale,            // out *= value                                  (Gemma's sqrt(dim) embedding scale)
  Norm,             // out = RMSNorm(in) * weight, row by row, eps = value; in may be out
  NormLogitRows,    // out (logit rows, dim) = RMSNorm(in[logit rows]) * weight, eps = value
  ProjectQkv,       // Q, K, V = in x (Wq | Wk | Wv)^T, or in x Wqkv^T split by rows when `fused` (Phi-3)
  AddBias,          // out rows += weight                             (Qwen2's q/k/v biases, gpt-oss's output bias)
  HeadNorm,         // RMSNorm of each head_dim slice of out's `heads` heads, eps = value (Qwen3, Gemma 3)
  Rope,             // rotate out's `heads` heads at the tokens' positions, see RopeSpec
  KvWrite,          // K and V rows into the layer's KV slots named by the block tables
  Attention,        // out = paged attention of Q over the layer's cache, see AttentionSpec
  Project,          // out = in x weight^T, or out += ... when `accumulate` (the residual add folded in)
  ProjectGateUp,    // gate, up = in x Wgate^T, in x Wup^T, or in x Wup^T split (gate rows, then up) when `fused`
  GatedActivation,  // out = act(gate) * up                           (SiLU: SwiGLU, GELU-tanh: GeGLU)
  ResidualAdd,      // out += in
  Softcap,          // out = value * tanh(out / value)                (Gemma 2's final logits)
  Capture,          // hands one row of `in` to the backend's capture (see CapturePoint); a no-op unless
                    // the step runs under Backend::forward_capture (backend.h, docs/inside.md)
  MoeFfn,           // out (+)= the mixture of experts of in: router logits = in x Wrouter^T (+ its
                    // bias), softmax, the `heads` best experts per row with their probabilities
                    // renormalized to sum 1, and the weighted sum of those experts' gated FFNs
                    // (gate/up/activation/down of the expert tensors' rows, plus their bias rows where
                    // the model has them: gpt-oss); `accumulate` as Project
};
inline constexpr int kNumRecipeOps = static_cast<int>(RecipeOp::MoeFfn) + 1;

// Where a Capture step sits in a layer, and what it hands over.
enum class CapturePoint : uint8_t {
  LayerInput,      // X entering the layer (the residual stream)
  Query,           // Q after biases, q-norm and RoPE: what the attention step scores with
  AfterAttention,  // X after the attention block's residual add
  LayerOutput,     // X leaving the layer
};
inline constexpr int kNumCapturePoints = static_cast<int>(CapturePoint::LayerOutput) + 1;

enum class Buf : uint8_t { None, X, XB, Q, K, V, Att, Proj, Hidden, Final, Logits };

// Which weight a step reads; the backend resolves it for the step's layer.
enum class WeightSlot : uint8_t {
  None, TokenEmbedding, AttnNorm, Wq, Wk, Wv, Wqkv, Bq, Bk, Bv, QNorm, KNorm, Wo, PostAttnNorm,
  FfnNorm, WGate, WUp, WDown, PostFfnNorm, OutputNorm, Classifier, Router, Bo,
};

// RoPE as this layer applies it: pair i of the first rope_dim dimensions turns by
// pos * freq_scale * base^(-2i/rope_dim) / factor[i], cos and sin times attn_factor.
struct RopeSpec {
  RopeStyle style = RopeStyle::Adjacent;
  int32_t rope_dim = 0;
  float base = 10000.0f;      // sliding layers' own base where the model has one (Gemma 3)
  float freq_scale = 1.0f;    // linear scaling (Gemma 3 global layers)
  float attn_factor = 1.0f;   // Phi-3 LongRoPE
  bool freq_factors = false;  // divide by ModelWeights::rope_freqs (Llama 3.1, Phi-3 long/short)
  // Adjacent pairs, no factors, no scaling: llama2.c's exact arithmetic applies.
  bool plain() const {
    return style == RopeStyle::Adjacent && !freq_factors && freq_scale == 1.0f && attn_factor == 1.0f;
  }
  bool operator==(const RopeSpec&) const = default;
};

// Attention as this layer runs it.
struct AttentionSpec {
  float scale = 0.0f;    // scores x scale; 0: 1/sqrt(head_dim) (the kernels' own default)
  float softcap = 0.0f;  // > 0: scores become softcap * tanh(score / softcap) (Gemma 2)
  int32_t window = 0;    // > 0: a query at p sees p - window + 1 .. p (this layer slides)
  bool sinks = false;    // each query head's sink logit (LayerWeights::sinks) joins its softmax (gpt-oss)
};

struct RecipeStep {
  RecipeOp op = RecipeOp::Norm;
  Buf in = Buf::None;
  Buf out = Buf::None;
  WeightSlot weight = WeightSlot::None;
  int32_t layer = -1;       // -1: a model-level step
  int32_t heads = 0;        // HeadNorm, Rope: heads per row of `out`; MoeFfn: experts per token
  bool fused = false;       // ProjectQkv, ProjectGateUp: one fused matrix
  bool accumulate = false;  // Project: out += in x W^T
  float value = 0.0f;       // Norm/HeadNorm eps, Scale factor, Softcap cap
  FfnActivation activation = FfnActivation::SiLU;
  CapturePoint capture = CapturePoint::LayerInput;  // Capture
  RopeSpec rope;
  AttentionSpec attention;
};

// The steps of decoder layer `layer`, in order.
std::vector<RecipeStep> layer_recipe(const ModelConfig& c, int32_t layer);

struct ModelRecipe {
  std::vector<RecipeStep> prologue;             // embedding (and its scale)
  std::vector<std::vector<RecipeStep>> layers;  // one recipe per layer
  std::vector<RecipeStep> epilogue;             // final norm, classifier, final soft-cap
};
ModelRecipe model_recipe(const ModelConfig& c);

std::string_view recipe_op_name(RecipeOp op);
std::string_view buf_name(Buf b);
std::string_view weight_slot_name(WeightSlot w);
std::string_view capture_point_name(CapturePoint p);
// "norm X->XB attn_norm eps 1e-05", for tests, docs and debugging.
std::string describe_step(const RecipeStep& s);

// A backend's implementation of the operation set. Each call runs one step over
// all of the step's rows (tokens, or logit rows), for step.layer; implementations
// keep per-step state (the batch, scratch) themselves.
class LayerOps {
 public:
  virtual ~LayerOps() = default;
  virtual Status embed(const RecipeStep& s) = 0;
  virtual Status scale(const RecipeStep& s) = 0;
  virtual Status norm(const RecipeStep& s) = 0;
  virtual Status norm_logit_rows(const RecipeStep& s) = 0;
  virtual Status project_qkv(const RecipeStep& s) = 0;
  virtual Status add_bias(const RecipeStep& s) = 0;
  virtual Status head_norm(const RecipeStep& s) = 0;
  virtual Status rope(const RecipeStep& s) = 0;
  virtual Status kv_write(const RecipeStep& s) = 0;
  virtual Status attention(const RecipeStep& s) = 0;
  virtual Status project(const RecipeStep& s) = 0;
  virtual Status project_gate_up(const RecipeStep& s) = 0;
  virtual Status gated_activation(const RecipeStep& s) = 0;
  virtual Status residual_add(const RecipeStep& s) = 0;
  virtual Status softcap(const RecipeStep& s) = 0;
  virtual Status capture(const RecipeStep& s) = 0;
  virtual Status moe_ffn(const RecipeStep& s) = 0;
};

// Runs the steps in order through `ops`; stops at the first error.
Status run_steps(std::span<const RecipeStep> steps, LayerOps& ops);

}  // namespace gb
