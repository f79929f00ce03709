// Engine::inspect (runtime/inside.h, docs/inside.md): an internal prefill-only
// request brings positions 0 .. p into the KV cache (prefix hits first), then
// position p runs again through the layer recipe with capture on and no KV
// write; the captured rows become the report.
#include <algorithm>
#include <cmath>
#include <variant>

#include "backend/kv_pool_sizing.h"
#include "kv/scheduler.h"
#include "runtime/engine.h"

namespace gb {
namespace {

double l2(const float* a, const float* b, int32_t n) {  // |a - b|, or |a| with b null
  double s = 0.0;
  for (int32_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(a[i]) - (b ? static_cast<double>(b[i]) : 0.0);
    s += d * d;
  }
  return std::sqrt(s);
}

double cosine(const float* a, const float* b, int32_t n) {
  double ab = 0.0, aa = 0.0, bb = 0.0;
  for (int32_t i = 0; i < n; ++i) {
    ab += static_cast<double>(a[i]) * b[i];
    aa += static_cast<double>(a[i]) * a[i];
    bb += static_cast<double>(b[i]) * b[i];
  }
  return aa > 0.0 && bb > 0.0 ? ab / std::sqrt(aa * bb) : 0.0;
}

std::vector<int32_t> table_ids(const BlockTable& t) {
  std::vector<int32_t> ids;
  ids.reserve(t.blocks.size());
  for (BlockId b : t.blocks) ids.push_back(b.value);
  return ids;
}

}  // namespace

Result<InsideReport> Engine::inspect(std::span<const TokenId> tokens, int32_t position, const InsideOptions& o) {
  GB_CHECK_MSG(scheduler_ != nullptr, "Engine::inspect before start()");
  const ModelConfig& c = model_->config;
  const auto n = static_cast<int32_t>(tokens.size());
  if (n == 0) return make_error("inspect: no tokens");
  if (position < 0 || position >= n)
    return make_error("inspect: position " + std::to_string(position) + " is outside the " + std::to_string(n) +
                      " tokens (0 .. " + std::to_string(n - 1) + ")");
  if (position + 2 > max_tokens_per_request())
    return make_error("inspect: position " + std::to_string(position) + " is beyond the context this engine runs (" +
                      std::to_string(max_tokens_per_request()) + " tokens)");
  const int32_t first_layer = o.first_layer, last_layer = o.last_layer < 0 ? c.num_layers - 1 : o.last_layer;
  if (first_layer < 0 || last_layer >= c.num_layers || first_layer > last_layer)
    return make_error("inspect: layers " + std::to_string(first_layer) + "-" + std::to_string(last_layer) +
                      " are not within the model's 0-" + std::to_string(c.num_layers - 1));
  if (o.top_k < 1 || o.top_k > 100) return make_error("inspect: top_k must be 1 .. 100");
  const double t0 = ms_now();

  // 1. Positions 0 .. p into the cache: an internal request, retained so its
  //    blocks stay until the capture has read them.
  GenerationRequest r;
  r.prompt_ids.assign(tokens.begin(), tokens.begin() + position + 1);
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = 1;
  r.ignore_eos = true;
  r.retain_kv = true;
  r.purpose = "inspect";
  Result<RequestId> submitted = submit(std::move(r));
  if (!submitted) return make_error("inspect: " + submitted.error().message);
  const RequestId id = *submitted;
  // Keep the window of position p (the sliding window would release it as
  // soon as p is computed: the next query, p + 1, no longer reads p - W + 1).
  scheduler_->kv_cache().hold_last_window(id);
  if (KvCacheManager* w = scheduler_->window_kv_cache()) w->hold_last_window(id);
  struct Release {
    Engine& e;
    RequestId id;
    ~Release() {
      if (e.is_live(id)) e.cancel(id);
      e.release(id);
      e.scheduler_->kv_cache().end_hold_last_window(id);
      if (KvCacheManager* w = e.scheduler_->window_kv_cache()) w->end_hold_last_window(id);
    }
  } release_guard{*this, id};
  while (is_live(id)) {
    Result<bool> ran = step();
    if (!ran) return make_error("inspect: " + ran.error().message);
    if (!*ran && is_live(id)) return make_error("inspect: the KV pool has no room for the inspected prefix now");
  }
  if (!scheduler_->kv_cache().has_request(id))
    return make_error("inspect: the inspected prefix did not keep its KV (the request failed or was released)");

  InsideReport rep;
  rep.architecture = c.architecture;
  rep.num_layers = c.num_layers;
  rep.num_heads = c.num_heads;
  rep.num_kv_heads = c.num_kv_heads;
  rep.head_dim = c.head_dim;
  rep.dim = c.dim;
  rep.position = position;
  rep.context.assign(tokens.begin(), tokens.begin() + position + 1);
  const std::string types = kv_types_name(config_.kv_types);  // "k/v"
  rep.k_type = types.substr(0, types.find('/'));
  rep.v_type = types.substr(types.find('/') + 1);
  for (const TraceEvent& e : events_)
    if (const auto* a = std::get_if<RequestAdmittedEvent>(&e.body); a && a->request == id)
      rep.reused_tokens = a->num_cached_tokens;
  rep.recomputed_tokens = position + 1 - rep.reused_tokens;
  const double t1 = ms_now();
  rep.prefill_ms = t1 - t0;

  // 2. Position p again, with capture on, reading the cache and writing none.
  const KvCacheManager* window_kv = scheduler_->window_kv_cache();
  const std::vector<int32_t> main_ids = table_ids(scheduler_->kv_cache().table(id));
  const std::vector<int32_t> window_ids = window_kv ? table_ids(window_kv->table(id)) : std::vector<int32_t>{};
  BatchLayout b;
  b.block_size = config_.block_size;
  const TokenId token = tokens[static_cast<size_t>(position)];
  b.add_sequence_rows(&token, 1, position, main_ids.data(), static_cast<int32_t>(main_ids.size()), 1);
  if (window_kv) b.add_window_table(window_ids.data(), static_cast<int32_t>(window_ids.size()));
  b.write_kv = false;
  CaptureRows rows;
  rep.logits.assign(static_cast<size_t>(c.vocab_size), 0.0f);
  GB_TRY(backend_->forward_capture(b, rep.logits, rows));

  rep.final_top = inside_top_k(rep.logits.data(), c.vocab_size, o.top_k);
  rep.target_is_next = position + 1 < n;
  rep.target = rep.target_is_next ? tokens[static_cast<size_t>(position) + 1] : rep.final_top.front().id;

  const int32_t dim = c.dim, q_dim = c.num_heads * c.head_dim, kv_dim = c.kv_dim();
  std::vector<float> keys, k_row(static_cast<size_t>(kv_dim)), v_row(static_cast<size_t>(kv_dim));
  for (int32_t l = first_layer; l <= last_layer; ++l) {
    InsideLayer layer;
    layer.layer = l;
    layer.window = c.is_sliding(l) ? c.sliding_window : 0;
    layer.first_position = layer.window > 0 ? std::max(0, position - layer.window + 1) : 0;
    const float* in = rows.layer_input.data() + static_cast<size_t>(l) * dim;
    const float* mid = rows.after_attention.data() + static_cast<size_t>(l) * dim;
    const float* out = rows.layer_output.data() + static_cast<size_t>(l) * dim;
    layer.residual_norm = l2(out, nullptr, dim);
    layer.attention_norm = l2(mid, in, dim);
    layer.mlp_norm = l2(out, mid, dim);
    layer.cosine_to_previous = cosine(out, in, dim);
    if (o.residuals) {
      layer.residual_in.assign(in, in + dim);
      layer.residual_out.assign(out, out + dim);
    }
    if (rows.experts_per_token > 0) {
      const auto at = static_cast<ptrdiff_t>(l) * rows.experts_per_token;
      layer.experts.assign(rows.experts.begin() + at, rows.experts.begin() + at + rows.experts_per_token);
      layer.expert_weights.assign(rows.expert_weights.begin() + at,
                                  rows.expert_weights.begin() + at + rows.experts_per_token);
    }
    if (o.attention) {
      const bool windowed = window_kv != nullptr && c.is_sliding(l);
      const std::vector<int32_t>& ids = windowed ? window_ids : main_ids;
      const int32_t span = position - layer.first_position + 1;
      keys.assign(static_cast<size_t>(span) * static_cast<size_t>(kv_dim), 0.0f);
      for (int32_t p = layer.first_position; p <= position; ++p) {
        const int32_t block = ids[static_cast<size_t>(p / config_.block_size)];
        if (block < 0) return make_error("inspect: position " + std::to_string(p) + "'s KV of layer " + std::to_string(l) + " was released");
        GB_TRY(backend_->read_kv_slot(l, block, p % config_.block_size, k_row, v_row));
        std::copy(k_row.begin(), k_row.end(), keys.begin() + static_cast<ptrdiff_t>(p - layer.first_position) * kv_dim);
      }
      layer.attention = inside_attention_rows(
          c, rows.query.data() + static_cast<size_t>(l) * q_dim, layer.first_position, position, c.attn_scale,
          c.attn_softcap, [&](int32_t p) { return keys.data() + static_cast<size_t>(p - layer.first_position) * kv_dim; },
          c.attn_sinks ? static_cast<const float*>(model_->weights.layers[static_cast<size_t>(l)].sinks.data) : nullptr);
      for (const std::vector<float>& row : layer.attention) {
        double ent = 0.0;
        for (float w : row)
          if (w > 0.0f) ent -= static_cast<double>(w) * std::log(static_cast<double>(w));
        layer.head_entropy.push_back(ent);
        layer.head_sink_mass.push_back(layer.first_position == 0 ? row.front() : 0.0);
      }
    }
    rep.layers.push_back(std::move(layer));
  }
  const double t2 = ms_now();
  rep.capture_ms = t2 - t1;

  // 3. The lens: every reported layer's output residual through the epilogue.
  if (o.lens) {
    const auto num = static_cast<int32_t>(rep.layers.size());
    std::vector<float> x(static_cast<size_t>(num) * dim), lens(static_cast<size_t>(num) * c.vocab_size);
    for (int32_t i = 0; i < num; ++i) {
      const float* out = rows.layer_output.data() + static_cast<size_t>(rep.layers[static_cast<size_t>(i)].layer) * dim;
      std::copy(out, out + dim, x.begin() + static_cast<ptrdiff_t>(i) * dim);
    }
    if (Status st = backend_->epilogue_rows(x, num, lens); !st) {
      rep.lens_error = st.error().message;
    } else {
      for (int32_t i = 0; i < num; ++i) {
        InsideLayer& layer = rep.layers[static_cast<size_t>(i)];
        const float* row = lens.data() + static_cast<size_t>(i) * c.vocab_size;
        layer.lens_top = inside_top_k(row, c.vocab_size, o.top_k);
        std::tie(layer.target_rank, layer.target_prob) =
            inside_rank(row, c.vocab_size, rep.target, layer.lens_top.front());
      }
    }
  }
  rep.lens_ms = ms_now() - t2;
  rep.total_ms = ms_now() - t0;
  return rep;
}

}  // namespace gb
