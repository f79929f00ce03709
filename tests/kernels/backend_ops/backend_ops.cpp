// The op table and the float64 references (see backend_ops.h). The references
// are written here from each op's formula, independently of the kernels'
// *_reference functions; weights are made with the weight-type table's
// quantize_row and read back with its dequantize_row (both tested bit-exact
// against gguf-py in test_dequantize.cpp).
#include "backend_ops.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace gbtest::ops {
namespace {

using namespace gb::kernels;

std::vector<float> normal(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// First index where |got - want| > tol(i), as a message; "" when none.
template <class Tol>
std::string compare(const std::vector<float>& got, const std::vector<double>& want, Tol tol) {
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::abs(static_cast<double>(got[i]) - want[i]);
    if (!(err <= tol(i)))  // NaN fails too
      return "at " + std::to_string(i) + ": got " + fmt(got[i]) + ", want " + fmt(want[i]) + " (|err| " + fmt(err) +
             " > " + fmt(tol(i)) + ")";
  }
  return {};
}

CaseResult result(bool supported, std::string problem) {
  if (!supported) return {Outcome::Unsupported, {}};
  if (!problem.empty()) return {Outcome::Failed, std::move(problem)};
  return {Outcome::Passed, {}};
}

CaseResult run_matmul(const OpCase& c, OpBackend& b) {
  const WeightTypeTraits& tr = weight_traits(c.wtype);
  const size_t row_bytes = *weight_bytes(c.wtype, static_cast<uint64_t>(c.cols));
  const auto wf = normal(static_cast<size_t>(c.rows * c.cols), 11u + static_cast<uint32_t>(c.rows * 31 + c.cols));
  const auto x = normal(static_cast<size_t>(c.tokens * c.cols), 12u + static_cast<uint32_t>(c.tokens));
  std::vector<uint8_t> w(row_bytes * static_cast<size_t>(c.rows));
  std::vector<float> wd(static_cast<size_t>(c.cols));
  std::vector<double> want(static_cast<size_t>(c.tokens * c.rows)), bound(want.size());
  for (int64_t r = 0; r < c.rows; ++r) {
    uint8_t* row = w.data() + static_cast<size_t>(r) * row_bytes;
    tr.quantize_row(wf.data() + r * c.cols, row, c.cols);
    tr.dequantize_row(row, wd.data(), c.cols);
    for (int64_t t = 0; t < c.tokens; ++t) {
      const float* xt = x.data() + t * c.cols;
      double dot = 0, abs_dot = 0, rounding = 0;
      for (int64_t i = 0; i < c.cols; ++i) {
        dot += static_cast<double>(wd[static_cast<size_t>(i)]) * xt[i];
        abs_dot += std::abs(static_cast<double>(wd[static_cast<size_t>(i)]) * xt[i]);
      }
      if (tr.activation == ActivationType::Q8)  // x rounded to 8 bits per block of 32: |error| <= d / 2
        for (int64_t blk = 0; blk < c.cols / kActBlock; ++blk) {
          double amax = 0;
          for (int64_t i = blk * kActBlock; i < (blk + 1) * kActBlock; ++i) amax = std::max(amax, std::abs(double(xt[i])));
          for (int64_t i = blk * kActBlock; i < (blk + 1) * kActBlock; ++i)
            rounding += std::abs(static_cast<double>(wd[static_cast<size_t>(i)])) * amax / 127.0 * 0.5001;
        }
      if (tr.activation == ActivationType::BF16)  // x rounded to bf16 (8 significant bits): |error| <= |x| 2^-8
        rounding += abs_dot * 0.00391;
      const size_t o = static_cast<size_t>(t * c.rows + r);
      want[o] = dot;
      bound[o] = rounding + 1e-5 * std::sqrt(static_cast<double>(c.cols)) * (1.0 + abs_dot / std::sqrt(double(c.cols)));
    }
  }
  std::vector<float> y(want.size(), std::nanf(""));
  const bool ok = b.matmul(c, w.data(), x.data(), y.data());
  return result(ok, compare(y, want, [&](size_t i) { return bound[i]; }));
}

CaseResult run_rowwise(const OpCase& c, OpBackend& b) {
  const size_t n = static_cast<size_t>(c.tokens * c.cols);
  const float gate_scale = c.kind == OpKind::Softcap ? 40.0f : c.kind == OpKind::SwiGlu ? 6.0f : 2.0f;
  auto x = normal(n, 21u + static_cast<uint32_t>(c.cols), gate_scale);
  const auto y = normal(n, 22u + static_cast<uint32_t>(c.tokens));
  const auto weight = normal(static_cast<size_t>(c.cols), 23u);
  std::vector<double> want(n);
  std::vector<float> got(n, std::nanf(""));
  bool ok = false;
  double rel = 1e-5, abs_tol = 1e-6;
  switch (c.kind) {
    case OpKind::RmsNorm:
      for (int64_t t = 0; t < c.tokens; ++t) {
        double ss = 0;
        for (int64_t i = 0; i < c.cols; ++i) ss += double(x[size_t(t * c.cols + i)]) * x[size_t(t * c.cols + i)];
        const double inv = 1.0 / std::sqrt(ss / double(c.cols) + double(c.param));
        for (int64_t i = 0; i < c.cols; ++i)
          want[size_t(t * c.cols + i)] = double(weight[size_t(i)]) * x[size_t(t * c.cols + i)] * inv;
      }
      ok = b.rmsnorm(c, x.data(), weight.data(), got.data());
      break;
    case OpKind::SwiGlu:
    case OpKind::GeluGated:
      for (size_t i = 0; i < n; ++i) {
        const double g = x[i];
        const double act = c.kind == OpKind::SwiGlu
                               ? g / (1.0 + std::exp(-g))
                               : 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g)));
        want[i] = act * y[i];
      }
      rel = 2e-6;
      ok = c.kind == OpKind::SwiGlu ? b.swiglu(c, x.data(), y.data(), got.data())
                                    : b.gelu_gated(c, x.data(), y.data(), got.data());
      break;
    case OpKind::Softcap:
      for (size_t i = 0; i < n; ++i) want[i] = double(c.param) * std::tanh(double(x[i]) / double(c.param));
      got = x;
      ok = b.softcap(c, got.data());
      break;
    case OpKind::Add:
      for (size_t i = 0; i < n; ++i) want[i] = double(x[i]) + double(y[i]);
      got = x;
      ok = b.add(c, got.data(), y.data());
      break;
    case OpKind::Softmax:
      for (int64_t t = 0; t < c.tokens; ++t) {
        const auto row = x.begin() + t * c.cols;
        const double mx = *std::max_element(row, row + c.cols);
        double sum = 0;
        for (int64_t i = 0; i < c.cols; ++i) sum += std::exp(double(row[i]) - mx);
        for (int64_t i = 0; i < c.cols; ++i) want[size_t(t * c.cols + i)] = std::exp(double(row[i]) - mx) / sum;
      }
      rel = 0.0;
      got = x;
      ok = b.softmax(c, got.data());
      break;
    default:
      return {Outcome::Failed, "not a row-wise op"};
  }
  return result(ok, compare(got, want, [&](size_t i) { return rel * std::abs(want[i]) + abs_tol; }));
}

CaseResult run_rope(const OpCase& c, OpBackend& b) {
  const int64_t heads = c.rows, hd = c.cols;
  auto v = normal(static_cast<size_t>(c.tokens * heads * hd), 31u + static_cast<uint32_t>(hd));
  std::vector<int32_t> positions(static_cast<size_t>(c.tokens));
  for (int64_t t = 0; t < c.tokens; ++t) positions[size_t(t)] = static_cast<int32_t>(7 * t + (t == 2 ? 4000 : 0));
  std::vector<float> factors(static_cast<size_t>(c.rope_dim / 2));
  for (size_t i = 0; i < factors.size(); ++i) factors[i] = 1.0f + 0.5f * static_cast<float>(i);
  RopeParams p;
  p.rope_dim = c.rope_dim;
  p.base = 10000.0f;
  p.style = c.rope_style;
  p.freq_factors = c.param != 0.0f ? factors.data() : nullptr;
  p.freq_scale = c.param != 0.0f ? 0.25f : 1.0f;
  p.attn_factor = c.param != 0.0f ? c.param : 1.0f;
  std::vector<double> want(v.begin(), v.end());
  const int32_t half = c.rope_dim / 2;
  for (int64_t t = 0; t < c.tokens; ++t)
    for (int64_t h = 0; h < heads; ++h)
      for (int32_t i = 0; i < half; ++i) {
        double inv = std::pow(10000.0, -2.0 * i / c.rope_dim);
        if (p.freq_factors) inv /= p.freq_factors[i];
        const double angle = positions[size_t(t)] * inv * p.freq_scale;
        const size_t base = size_t((t * heads + h) * hd);
        const size_t a = base + size_t(c.rope_style == RopeStyle::Adjacent ? 2 * i : i);
        const size_t bb = base + size_t(c.rope_style == RopeStyle::Adjacent ? 2 * i + 1 : i + half);
        const double x0 = v[a], x1 = v[bb], cs = std::cos(angle) * p.attn_factor, sn = std::sin(angle) * p.attn_factor;
        want[a] = x0 * cs - x1 * sn;
        want[bb] = x0 * sn + x1 * cs;
      }
  const bool ok = b.rope(c, v.data(), positions.data(), p);
  return result(ok, compare(v, want, [](size_t) { return 2e-5; }));
}

CaseResult run_attention(const OpCase& c, OpBackend& b) {
  const int32_t hd = static_cast<int32_t>(c.cols), kv_heads = static_cast<int32_t>(c.rows), bs = 16;
  const int32_t nblocks = (c.ctx + bs - 1) / bs + 2;
  const auto k = normal(size_t(nblocks) * bs * kv_heads * hd, 41u + uint32_t(hd), 2.0f);
  const auto v = normal(size_t(nblocks) * bs * kv_heads * hd, 42u + uint32_t(c.ctx));
  const auto q = normal(size_t(hd), 43u, 2.0f);
  std::vector<int32_t> table(static_cast<size_t>(nblocks));
  for (int32_t i = 0; i < nblocks; ++i) table[size_t(i)] = (i * 5 + 3) % nblocks;  // scrambled, a permutation
  const PagedKvView kv{k.data(), v.data(), table.data(), bs, kv_heads, hd};
  const int32_t head = kv_heads - 1;
  const double scale = c.shape.scale > 0 ? c.shape.scale : 1.0 / std::sqrt(double(hd));
  std::vector<double> scores;
  for (int32_t p = c.shape.first; p < c.ctx; ++p) {
    double s = 0;
    for (int32_t i = 0; i < hd; ++i) s += double(q[size_t(i)]) * kv.k_at(p, head)[i];
    s *= scale;
    if (c.shape.softcap > 0) s = c.shape.softcap * std::tanh(s / c.shape.softcap);
    scores.push_back(s);
  }
  const double mx = *std::max_element(scores.begin(), scores.end());
  double sum = 0;
  for (double& s : scores) sum += (s = std::exp(s - mx));
  std::vector<double> want(size_t(hd), 0.0);
  for (int32_t p = c.shape.first; p < c.ctx; ++p)
    for (int32_t i = 0; i < hd; ++i) want[size_t(i)] += scores[size_t(p - c.shape.first)] / sum * kv.v_at(p, head)[i];
  std::vector<float> out(size_t(hd), std::nanf(""));
  const bool ok = b.attention(c, q.data(), kv, out.data());
  return result(ok, compare(out, want, [](size_t) { return 2e-5; }));
}

void add_matmul_cases(std::vector<OpCase>& out) {
  for (int t = 0; t < kNumWeightTypes; ++t) {
    const auto type = static_cast<WeightType>(t);
    const WeightTypeTraits& tr = weight_traits(type);
    // Float types: 1, 7, 33, 4095 columns. Block types: 1 and 3 blocks, and a
    // 4095-ish row (the largest whole number of blocks below 4096).
    std::vector<int64_t> cols = tr.block_elements == 1 ? std::vector<int64_t>{1, 7, 33, 4095}
                                                       : std::vector<int64_t>{tr.block_elements, 3 * tr.block_elements,
                                                                              (4095 / tr.block_elements) * tr.block_elements};
    for (int64_t col : cols)
      for (auto [rows, tokens] : {std::pair<int64_t, int64_t>{1, 1}, {7, 3}, {33, 5}}) {
        if (col >= 4000 && rows == 33) rows = 9;  // keep the big rows cheap
        OpCase c;
        c.kind = OpKind::Matmul;
        c.wtype = type;
        c.rows = rows;
        c.cols = col;
        c.tokens = tokens;
        c.name = "matmul " + std::string(tr.name) + " rows " + std::to_string(rows) + " cols " + std::to_string(col) +
                 " tokens " + std::to_string(tokens);
        out.push_back(c);
      }
  }
}

void add_rowwise_cases(std::vector<OpCase>& out) {
  const std::pair<OpKind, const char*> kinds[] = {{OpKind::RmsNorm, "rmsnorm"}, {OpKind::SwiGlu, "swiglu"},
                                                  {OpKind::GeluGated, "gelu_gated"}, {OpKind::Softcap, "softcap"},
                                                  {OpKind::Add, "add"},           {OpKind::Softmax, "softmax"}};
  for (auto [kind, name] : kinds)
    for (int64_t cols : {1, 7, 33, 4095})
      for (int64_t tokens : {1, 3}) {
        OpCase c;
        c.kind = kind;
        c.cols = cols;
        c.tokens = tokens;
        c.param = kind == OpKind::RmsNorm ? 1e-5f : kind == OpKind::Softcap ? 30.0f : 0.0f;
        c.name = std::string(name) + " cols " + std::to_string(cols) + " tokens " + std::to_string(tokens);
        out.push_back(c);
      }
}

struct RopeShape {
  int64_t heads, head_dim;
  int32_t rope_dim;
};
// One pair; a small head; a partial rotation (rope_dim < head_dim); a wide head.
constexpr RopeShape kRopeShapes[] = {{1, 2, 2}, {3, 8, 8}, {5, 64, 32}, {2, 128, 128}};

void add_rope_cases(std::vector<OpCase>& out) {
  for (RopeStyle style : {RopeStyle::Adjacent, RopeStyle::NeoX})
    for (const RopeShape& shape : kRopeShapes)
      for (float scaling : {0.0f, 1.3f}) {
        const auto [heads, hd, rope_dim] = shape;
        OpCase c;
        c.kind = OpKind::Rope;
        c.rows = heads;
        c.cols = hd;
        c.tokens = 3;
        c.rope_style = style;
        c.rope_dim = rope_dim;
        c.param = scaling;  // nonzero: freq factors, freq_scale 0.25 and attn_factor = param
        c.name = std::string("rope ") + (style == RopeStyle::Adjacent ? "adjacent" : "neox") + " heads " +
                 std::to_string(heads) + " head_dim " + std::to_string(hd) + " rope_dim " + std::to_string(rope_dim) +
                 (scaling != 0.0f ? " scaled" : "");
        out.push_back(c);
      }
}

void add_attention_cases(std::vector<OpCase>& out) {
  for (int64_t hd : {4, 8, 64, 128})
    for (int32_t ctx : {1, 7, 33, 301})
      for (int variant = 0; variant < 2; ++variant) {
        OpCase c;
        c.kind = OpKind::Attention;
        c.rows = 3;  // kv heads
        c.cols = hd;
        c.ctx = ctx;
        if (variant == 1) c.shape = AttentionShape{std::max(0, ctx - 5), 0.0625f, 5.0f};  // window, scale, softcap
        c.name = "attention head_dim " + std::to_string(hd) + " ctx " + std::to_string(ctx) +
                 (variant == 1 ? " window 5 scale 1/16 softcap 5" : "");
        out.push_back(c);
      }
}

}  // namespace

std::vector<OpCase> op_cases() {
  std::vector<OpCase> out;
  add_matmul_cases(out);
  add_rowwise_cases(out);
  add_rope_cases(out);
  add_attention_cases(out);
  return out;
}

CaseResult run_case(const OpCase& c, OpBackend& backend) {
  switch (c.kind) {
    case OpKind::Matmul: return run_matmul(c, backend);
    case OpKind::Rope: return run_rope(c, backend);
    case OpKind::Attention: return run_attention(c, backend);
    default: return run_rowwise(c, backend);
  }
}

}  // namespace gbtest::ops
