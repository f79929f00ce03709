// CpuBackend's mixture-of-experts step (see cpu_backend_impl.h): routing, the
// experts' dispatches over the rows routed to them, and the routing handed to
// the step's observers.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "backend/cpu_backend_impl.h"
#include "cpu/ops.h"

namespace gb {

namespace {
// A mixture's routing of n rows of router logits (n, experts): per row a
// softmax and its k best experts (ties to the lower index), best first, with
// their probabilities renormalized to sum 1, at chosen / weight[row * k + j].
void route_rows(const float* logits, int64_t n, int32_t experts, int32_t k, std::vector<int32_t>& chosen,
                std::vector<float>& weight) {
  chosen.resize(static_cast<size_t>(n * k));
  weight.resize(static_cast<size_t>(n * k));
  std::vector<int32_t> order(static_cast<size_t>(experts));
  std::vector<float> prob(static_cast<size_t>(experts));
  for (int64_t i = 0; i < n; ++i) {
    const float* logit = logits + i * experts;
    const float top = *std::max_element(logit, logit + experts);
    float sum = 0.0f;
    for (int32_t e = 0; e < experts; ++e) sum += prob[static_cast<size_t>(e)] = std::exp(logit[e] - top);
    for (int32_t e = 0; e < experts; ++e) prob[static_cast<size_t>(e)] /= sum;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
      return prob[static_cast<size_t>(a)] > prob[static_cast<size_t>(b)] ||
             (prob[static_cast<size_t>(a)] == prob[static_cast<size_t>(b)] && a < b);
    });
    float chosen_sum = 0.0f;
    for (int32_t j = 0; j < k; ++j) chosen_sum += prob[static_cast<size_t>(order[static_cast<size_t>(j)])];
    for (int32_t j = 0; j < k; ++j) {
      const int32_t e = order[static_cast<size_t>(j)];
      chosen[static_cast<size_t>(i * k + j)] = e;
      weight[static_cast<size_t>(i * k + j)] = prob[static_cast<size_t>(e)] / chosen_sum;
    }
  }
}
}  // namespace

// Row `from`'s routing (k experts and weights) to where the step's observers
// want it: the logit rows' routing (BatchLayout::routing) and forward_capture's
// token.
void CpuBackend::record_routing(int32_t layer, int32_t k, const std::vector<int32_t>& chosen,
                                const std::vector<float>& weight) {
  const auto copy = [&](int64_t row, int32_t* experts_out, float* weights_out) {
    const auto from = static_cast<ptrdiff_t>(row * k);
    std::copy_n(chosen.begin() + from, k, experts_out);
    std::copy_n(weight.begin() + from, k, weights_out);
  };
  if (RoutingRows* r = batch_->routing; r != nullptr && r->experts_per_token == k)
    for (int32_t row = 0; row < batch_->num_logits(); ++row) {
      const auto at = static_cast<size_t>((int64_t{row} * r->layers + layer) * k);
      copy(batch_->logit_token_indices[static_cast<size_t>(row)], r->experts.data() + at, r->weights.data() + at);
    }
  if (capture_ != nullptr && capture_->experts_per_token == k) {
    const auto at = static_cast<size_t>(int64_t{layer} * k);
    copy(capture_->token, capture_->experts.data() + at, capture_->expert_weights.data() + at);
  }
}

// A mixture of experts over the step's rows (route_rows): the rows routed to
// each expert, gathered by expert, go through its gate/up/activation/down
// (views of its rows of the expert tensors, read in place; every expert's
// projection in one dispatch, the threads splitting experts and rows), each
// output added with its row's weight in expert index order. Only the chosen
// experts' weights are read.
Status CpuBackend::moe_ffn(const RecipeStep& s) {
  const ModelConfig& c = model_->config;
  const LayerWeights& lw = weights().layers[static_cast<size_t>(s.layer)];
  const int64_t n = rows(s.in), dim = c.dim, hidden = c.expert_hidden_dim;
  const int32_t experts = c.num_experts, k = s.heads;
  grow(router_, static_cast<size_t>(n * experts));
  matmul_group({{&lw.router, router_.data()}}, buf(s.in), n);
  if (const auto* bias = static_cast<const float*>(lw.router_bias.data); bias != nullptr)
    for (int64_t i = 0; i < n; ++i) kernels::add_inplace(router_.data() + i * experts, bias, experts);
  std::vector<int32_t> chosen;
  std::vector<float> chosen_weight;
  route_rows(router_.data(), n, experts, k, chosen, chosen_weight);
  record_routing(s.layer, k, chosen, chosen_weight);
  // The routed rows grouped by expert (index order), each expert's in row order.
  const int64_t routed = n * k;
  std::vector<int64_t> offset(static_cast<size_t>(experts) + 1, 0);
  for (int64_t t = 0; t < routed; ++t) ++offset[static_cast<size_t>(chosen[static_cast<size_t>(t)]) + 1];
  for (int32_t e = 0; e < experts; ++e) offset[static_cast<size_t>(e) + 1] += offset[static_cast<size_t>(e)];
  // slot[row * k + j]: where row's j-th routed copy sits, sorted per row (so in
  // expert index order).
  std::vector<int64_t> routed_row(static_cast<size_t>(routed)), slot(static_cast<size_t>(routed)),
      routed_expert(static_cast<size_t>(routed)), next(offset.begin(), offset.end() - 1);
  std::vector<float> routed_weight(static_cast<size_t>(routed));
  for (int64_t t = 0; t < routed; ++t) {
    const int64_t at = next[static_cast<size_t>(chosen[static_cast<size_t>(t)])]++;
    routed_row[static_cast<size_t>(at)] = t / k;
    routed_expert[static_cast<size_t>(at)] = chosen[static_cast<size_t>(t)];
    routed_weight[static_cast<size_t>(at)] = chosen_weight[static_cast<size_t>(t)];
    slot[static_cast<size_t>(t)] = at;
  }
  for (int64_t i = 0; i < n; ++i) std::sort(slot.begin() + i * k, slot.begin() + (i + 1) * k);
  grow(expert_in_, static_cast<size_t>(routed * dim));
  grow(expert_gate_, static_cast<size_t>(routed * hidden));
  grow(expert_up_, static_cast<size_t>(routed * hidden));
  grow(expert_out_, static_cast<size_t>(routed * dim));
  // The row-wise steps around the dispatches (gather, activation, weighted sum)
  // split across the threads when there is enough of them (prefill).
  const auto rowwise = [&](int64_t count, int64_t width, auto&& fn) {
    if (count * width < kMinParallelMacs / 16) fn(0, count, 0);
    else pool_.parallel_for(count, fn);
  };
  const float* in = buf(s.in);
  rowwise(routed, dim, [&](int64_t begin, int64_t end, int) {
    for (int64_t j = begin; j < end; ++j)
      std::copy_n(in + routed_row[static_cast<size_t>(j)] * dim, dim, expert_in_.data() + j * dim);
  });
  // Each chosen expert's gate, up and down: views of its rows of the stacks,
  // run over its routed rows as jobs of one dispatch per projection.
  std::vector<TensorView> views;
  views.reserve(static_cast<size_t>(3 * std::min<int64_t>(experts, routed)));
  std::vector<MatmulJob> gate_up, down;
  const auto view = [&](const TensorView& stack, int32_t e, int64_t rows_per_expert) {
    TensorView v = stack;
    v.data = stack.row(e * rows_per_expert);
    v.rows = rows_per_expert;
    views.push_back(v);
    return &views.back();
  };
  for (int32_t e = 0; e < experts; ++e) {
    const int64_t first = offset[static_cast<size_t>(e)], m = offset[static_cast<size_t>(e) + 1] - first;
    if (m == 0) continue;
    gate_up.push_back({view(lw.gate_exps, e, hidden), expert_gate_.data() + first * hidden, first, m});
    gate_up.push_back({view(lw.up_exps, e, hidden), expert_up_.data() + first * hidden, first, m});
    down.push_back({view(lw.down_exps, e, dim), expert_out_.data() + first * dim, first, m});
  }
  matmul_jobs(gate_up, expert_in_.data(), routed);
  // gpt-oss: each expert's bias rows (F32 from the loader; expert of routed row
  // j: routed_expert[j]).
  const auto* gate_bias = static_cast<const float*>(lw.gate_exps_bias.data);
  const auto* up_bias = static_cast<const float*>(lw.up_exps_bias.data);
  const auto* down_bias = static_cast<const float*>(lw.down_exps_bias.data);
  const kernels::GatedActivationFn activate = gated_activation_kernel(s.activation);
  rowwise(routed, hidden, [&](int64_t begin, int64_t end, int) {
    for (int64_t j = begin; j < end; ++j) {
      float* g = expert_gate_.data() + j * hidden;
      float* u = expert_up_.data() + j * hidden;
      const int64_t e = routed_expert[static_cast<size_t>(j)];
      if (gate_bias != nullptr) kernels::add_inplace(g, gate_bias + e * hidden, hidden);
      if (up_bias != nullptr) kernels::add_inplace(u, up_bias + e * hidden, hidden);
      activate(g, g, u, hidden);
    }
  });
  matmul_jobs(down, expert_gate_.data(), routed);
  if (down_bias != nullptr)
    rowwise(routed, dim, [&](int64_t begin, int64_t end, int) {
      for (int64_t j = begin; j < end; ++j)
        kernels::add_inplace(expert_out_.data() + j * dim, down_bias + routed_expert[static_cast<size_t>(j)] * dim, dim);
    });
  // Each row's experts summed in expert index order, with their weights.
  grow(moe_sum_, static_cast<size_t>(n * dim));
  rowwise(n, dim * k, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      float* acc = moe_sum_.data() + i * dim;
      std::fill_n(acc, dim, 0.0f);
      for (int32_t j = 0; j < k; ++j) {
        const auto at = static_cast<size_t>(slot[static_cast<size_t>(i * k + j)]);
        const float* y = expert_out_.data() + static_cast<int64_t>(at) * dim;
        const float w = routed_weight[at];
        for (int64_t d = 0; d < dim; ++d) acc[d] += w * y[d];
      }
    }
  });
  if (s.accumulate) kernels::add_inplace(buf(s.out), moe_sum_.data(), n * dim);
  else std::copy_n(moe_sum_.data(), n * dim, buf(s.out));
  return {};
}

}  // namespace gb
