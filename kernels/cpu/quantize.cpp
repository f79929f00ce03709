// Quantizers (see quantize.h). Scale search: for a symmetric code range the
// candidates map the largest-magnitude value to the end levels +-0.1 steps, and
// each candidate's codes are refitted by least squares (d = sum x q / sum q q);
// for an offset code range (q in 0..nmax, x ~ d q + m) the codes of each
// candidate are refitted by a two-parameter least-squares line. The candidate
// with the smallest squared error wins.
#include "cpu/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu/convert.h"
#include "cpu/quant_blocks.h"
#include "cpu/repack.h"

namespace gb::kernels {

using namespace quant;

namespace {

void put_half(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  p[0] = static_cast<uint8_t>(h & 0xFF);
  p[1] = static_cast<uint8_t>(h >> 8);
}
float round_half(float v) { return f16_to_f32(f32_to_f16(v)); }
int nearest_int(float v) { return static_cast<int>(std::lround(v)); }

// Symmetric codes q in [qmin, qmax] with x ~ d q: returns d, fills q.
float fit_symmetric(const float* x, int n, int qmin, int qmax, int* q) {
  float amax = 0, m = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), m = x[i];
  if (amax == 0) {
    for (int i = 0; i < n; ++i) q[i] = 0;
    return 0;
  }
  float best_d = 0, best_err = INFINITY;
  int tmp[256];
  for (int end : {qmin, qmax}) {
    if (end == 0) continue;
    for (int k = -10; k <= 10; ++k) {
      const float level = static_cast<float>(end) + 0.1f * static_cast<float>(k) * (end < 0 ? -1.0f : 1.0f);
      if (level == 0 || (level < 0) != (end < 0)) continue;
      const float inv = level / m;
      double sxq = 0, sqq = 0;
      for (int i = 0; i < n; ++i) {
        tmp[i] = std::clamp(nearest_int(x[i] * inv), qmin, qmax);
        sxq += static_cast<double>(x[i]) * tmp[i];
        sqq += static_cast<double>(tmp[i]) * tmp[i];
      }
      if (sqq == 0) continue;
      const float d = static_cast<float>(sxq / sqq);
      double err = 0;
      for (int i = 0; i < n; ++i) err += std::pow(static_cast<double>(x[i]) - static_cast<double>(d) * tmp[i], 2);
      if (err < best_err) {
        best_err = static_cast<float>(err);
        best_d = d;
        std::copy(tmp, tmp + n, q);
      }
    }
  }
  return best_d;
}

// Offset codes q in [0, nmax] with x ~ d q + m; min_le_zero keeps m <= 0 (the
// K-types store -dmin * min with min >= 0). Returns d and m, fills q.
void fit_offset(const float* x, int n, int nmax, bool min_le_zero, float& d_out, float& m_out, int* q) {
  float lo = *std::min_element(x, x + n), hi = *std::max_element(x, x + n);
  if (min_le_zero) lo = std::min(lo, 0.0f);
  d_out = 0;
  m_out = lo;
  if (hi <= lo) {
    for (int i = 0; i < n; ++i) q[i] = 0;
    return;
  }
  float best_err = INFINITY;
  int tmp[256];
  for (int k = -6; k <= 12; ++k) {
    const float d0 = (hi - lo) / (static_cast<float>(nmax) + 0.1f * static_cast<float>(k));
    if (d0 <= 0) continue;
    for (int i = 0; i < n; ++i) tmp[i] = std::clamp(nearest_int((x[i] - lo) / d0), 0, nmax);
    // Least-squares line through (q, x).
    double sq = 0, sqq = 0, sx = 0, sxq = 0;
    for (int i = 0; i < n; ++i) {
      sq += tmp[i];
      sqq += static_cast<double>(tmp[i]) * tmp[i];
      sx += x[i];
      sxq += static_cast<double>(x[i]) * tmp[i];
    }
    const double det = n * sqq - sq * sq;
    double d = d0, m = lo;
    if (det > 0) {
      d = (n * sxq - sq * sx) / det;
      m = (sx - d * sq) / n;
    }
    if (min_le_zero && m > 0) {  // refit d alone with m = 0
      m = 0;
      d = sqq > 0 ? sxq / sqq : d0;
    }
    if (d <= 0) continue;
    double err = 0;
    for (int i = 0; i < n; ++i) err += std::pow(x[i] - (d * tmp[i] + m), 2);
    if (err < best_err) {
      best_err = static_cast<float>(err);
      d_out = static_cast<float>(d);
      m_out = static_cast<float>(m);
      std::copy(tmp, tmp + n, q);
    }
  }
}

int nearest_iq4(float v) {
  int best = 0;
  for (int i = 1; i < 16; ++i)
    if (std::fabs(v - kIq4nlValues[i]) < std::fabs(v - kIq4nlValues[best])) best = i;
  return best;
}

// IQ4_NL codes for n values: x ~ d * kIq4nlValues[idx]. Returns d, fills idx.
float fit_iq4(const float* x, int n, int* idx) {
  float amax = 0, m = 0;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), m = x[i];
  if (amax == 0) {
    for (int i = 0; i < n; ++i) idx[i] = nearest_iq4(0);
    return 0;
  }
  float best_d = 0, best_err = INFINITY;
  int tmp[32];
  for (float end : {-127.0f, 113.0f}) {
    for (int k = -8; k <= 8; ++k) {
      const float inv = end * (1.0f + 0.02f * static_cast<float>(k)) / m;
      double sxv = 0, svv = 0;
      for (int i = 0; i < n; ++i) {
        tmp[i] = nearest_iq4(x[i] * inv);
        sxv += static_cast<double>(x[i]) * kIq4nlValues[tmp[i]];
        svv += static_cast<double>(kIq4nlValues[tmp[i]]) * kIq4nlValues[tmp[i]];
      }
      const float d = static_cast<float>(sxv / svv);
      double err = 0;
      for (int i = 0; i < n; ++i) err += std::pow(x[i] - static_cast<double>(d) * kIq4nlValues[tmp[i]], 2);
      if (err < best_err) {
        best_err = static_cast<float>(err);
        best_d = d;
        std::copy(tmp, tmp + n, idx);
      }
    }
  }
  return best_d;
}

// Codes for x given a stored scale d (and offset m): the final re-rounding.
int code_for(float x, float d, float m, int qmin, int qmax) {
  return d == 0 ? std::clamp(0, qmin, qmax) : std::clamp(nearest_int((x - m) / d), qmin, qmax);
}

}  // namespace

void quantize_row_f32(const float* src, void* dst, int64_t n) { std::memcpy(dst, src, static_cast<size_t>(n) * 4); }
void quantize_row_f16(const float* src, void* dst, int64_t n) {
  auto* o = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) o[i] = f32_to_f16(src[i]);
}
void quantize_row_bf16(const float* src, void* dst, int64_t n) {
  auto* o = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) o[i] = f32_to_bf16(src[i]);
}

void quantize_row_q8_0(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<uint8_t*>(dst);
  for (; n > 0; n -= 32, x += 32, b += 34) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = round_half(amax / 127.0f);
    put_half(b, d);
    for (int i = 0; i < 32; ++i) b[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(code_for(x[i], d, 0, -127, 127)));
  }
}

// Q4_0 / Q5_0: symmetric codes with an offset of 2^(bits-1).
template <int kBits>
void quantize_row_legacy_sym(const float* x, uint8_t* b, int64_t n) {
  constexpr int kHalf = 1 << (kBits - 1), kBytes = kBits == 4 ? 18 : 22, kQs = kBits == 4 ? 2 : 6;
  int q[32];
  for (; n > 0; n -= 32, x += 32, b += kBytes) {
    const float d = round_half(fit_symmetric(x, 32, -kHalf, kHalf - 1, q));
    put_half(b, d);
    uint32_t qh = 0;
    for (int i = 0; i < 32; ++i) q[i] = code_for(x[i], d, 0, -kHalf, kHalf - 1) + kHalf;
    for (int j = 0; j < 16; ++j) {
      b[kQs + j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
      qh |= static_cast<uint32_t>(q[j] >> 4) << j | static_cast<uint32_t>(q[j + 16] >> 4) << (j + 16);
    }
    if constexpr (kBits == 5) std::memcpy(b + 2, &qh, 4);
  }
}

// Q4_1 / Q5_1: offset codes 0..2^bits-1 with a free min.
template <int kBits>
void quantize_row_legacy_offset(const float* x, uint8_t* b, int64_t n) {
  constexpr int kMax = (1 << kBits) - 1, kBytes = kBits == 4 ? 20 : 24, kQs = kBits == 4 ? 4 : 8;
  int q[32];
  for (; n > 0; n -= 32, x += 32, b += kBytes) {
    float d, m;
    fit_offset(x, 32, kMax, false, d, m, q);
    d = round_half(d);
    m = round_half(m);
    put_half(b, d);
    put_half(b + 2, m);
    uint32_t qh = 0;
    for (int i = 0; i < 32; ++i) q[i] = code_for(x[i], d, m, 0, kMax);
    for (int j = 0; j < 16; ++j) {
      b[kQs + j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
      qh |= static_cast<uint32_t>(q[j] >> 4) << j | static_cast<uint32_t>(q[j + 16] >> 4) << (j + 16);
    }
    if constexpr (kBits == 5) std::memcpy(b + 4, &qh, 4);
  }
}

void quantize_row_q4_0(const float* x, void* dst, int64_t n) { quantize_row_legacy_sym<4>(x, static_cast<uint8_t*>(dst), n); }
void quantize_row_q5_0(const float* x, void* dst, int64_t n) { quantize_row_legacy_sym<5>(x, static_cast<uint8_t*>(dst), n); }
void quantize_row_q4_1(const float* x, void* dst, int64_t n) { quantize_row_legacy_offset<4>(x, static_cast<uint8_t*>(dst), n); }
void quantize_row_q5_1(const float* x, void* dst, int64_t n) { quantize_row_legacy_offset<5>(x, static_cast<uint8_t*>(dst), n); }

void quantize_row_iq4_nl(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<uint8_t*>(dst);
  int idx[32];
  for (; n > 0; n -= 32, x += 32, b += 18) {
    const float d = round_half(fit_iq4(x, 32, idx));
    put_half(b, d);
    for (int i = 0; i < 32; ++i) idx[i] = nearest_iq4(d == 0 ? 0 : x[i] / d);
    for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(idx[j] | (idx[j + 16] << 4));
  }
}

// MXFP4 chooses as ggml's reference quantizer does (quantize_row_mxfp4_ref,
// and gguf-py's MXFP4.quantize_blocks), byte for byte on the values that test
// covers (tests/kernels/cpu/test_mxfp4.cpp): no search, e = floor(log2f(amax))
// + 125, so the largest |x| is 8 to 16 steps of d = 2^(e - 128) and values
// past 12 d saturate; each value takes the nearest of the 16 levels, a tie
// going to the lower code (the smaller magnitude; +0 before -0). log2f is
// rounded to float first, as the reference's is: an amax a few ulps below a
// power of two counts as that power. One difference: an amax below 2^-125,
// where the reference's uint8 cast of a negative exponent wraps (gguf-py then
// writes e = 254 or 255 over all-zero codes), takes e = 0.
namespace {
int nearest_mxfp4(float v, float d) {
  // The levels d * k are exact unless they overflow (e >= 253): such a level
  // is never nearest, and testing for it keeps an FMA-contracted d * k - v
  // from making it finite.
  const auto err = [&](int i) {
    const float level = d * static_cast<float>(kMxfp4Values[i]);
    return std::isinf(level) ? INFINITY : std::fabs(level - v);
  };
  int best = 0;
  float best_err = err(0);
  for (int i = 1; i < 16; ++i)
    if (const float e = err(i); e < best_err) best = i, best_err = e;
  return best;
}
}  // namespace

void quantize_row_mxfp4(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<uint8_t*>(dst);
  for (; n > 0; n -= 32, x += 32, b += 17) {
    float amax = 0;
    for (int i = 0; i < 32; ++i)
      if (amax < std::fabs(x[i])) amax = std::fabs(x[i]);  // NaN never wins, as in the reference
    int e = 0;
    if (amax > 0) {
      const float l = std::floor(std::log2(amax));  // log2f, as the reference
      e = l < -125.0f ? 0 : l > 128.0f ? 253 : static_cast<int>(l) + 125;  // 253: an infinite amax
    }
    b[0] = static_cast<uint8_t>(e);
    const float d = e8m0_half(b[0]);
    for (int j = 0; j < 16; ++j)
      b[1 + j] = static_cast<uint8_t>(nearest_mxfp4(x[j], d) | (nearest_mxfp4(x[j + 16], d) << 4));
  }
}

// K-types with offsets (Q2_K: 16 x 16 values, 4-bit scales; Q4_K/Q5_K: 8 x 32,
// 6-bit): per sub-block (scale, min) fits, then the super-block d and dmin.
struct OffsetFits {
  float scale[16], min[16];  // x ~ scale * q - min
  float d, dmin;
  int sc[16], mn[16];        // stored codes
};
void fit_k_offsets(const float* x, int subs, int sub_len, int nmax, int code_max, OffsetFits& f) {
  int q[32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < subs; ++j) {
    float d, m;
    fit_offset(x + j * sub_len, sub_len, nmax, true, d, m, q);
    f.scale[j] = d;
    f.min[j] = -m;
    max_scale = std::max(max_scale, d);
    max_min = std::max(max_min, -m);
  }
  f.d = round_half(max_scale / static_cast<float>(code_max));
  f.dmin = round_half(max_min / static_cast<float>(code_max));
  for (int j = 0; j < subs; ++j) {
    f.sc[j] = f.d > 0 ? std::clamp(nearest_int(f.scale[j] / f.d), 0, code_max) : 0;
    f.mn[j] = f.dmin > 0 ? std::clamp(nearest_int(f.min[j] / f.dmin), 0, code_max) : 0;
  }
}

void quantize_row_q2_k(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<uint8_t*>(dst);
  for (; n > 0; n -= 256, x += 256, b += 84) {
    std::memset(b, 0, 84);
    OffsetFits f;
    fit_k_offsets(x, 16, 16, 3, 15, f);
    put_half(b + 80, f.d);
    put_half(b + 82, f.dmin);
    for (int g = 0; g < 8; ++g)
      for (int l = 0; l < 32; ++l) {
        const int j = 2 * g + l / 16;
        b[j] = static_cast<uint8_t>(f.sc[j] | (f.mn[j] << 4));
        const float dl = f.d * static_cast<float>(f.sc[j]), ml = f.dmin * static_cast<float>(f.mn[j]);
        const int q = code_for(x[32 * g + l], dl, -ml, 0, 3);
        b[16 + 32 * (g / 4) + l] |= static_cast<uint8_t>(q << (2 * (g % 4)));
      }
  }
}

template <bool kFifthBit>
void quantize_row_q45_k(const float* x, uint8_t* b, int64_t n) {
  constexpr int kBytes = kFifthBit ? 176 : 144, kMax = kFifthBit ? 31 : 15;
  for (; n > 0; n -= 256, x += 256, b += kBytes) {
    std::memset(b, 0, kBytes);
    OffsetFits f;
    fit_k_offsets(x, 8, 32, kMax, 63, f);
    put_half(b, f.d);
    put_half(b + 2, f.dmin);
    uint8_t* s = b + 4;
    for (int j = 0; j < 8; ++j) {
      if (j < 4) {
        s[j] |= static_cast<uint8_t>(f.sc[j] & 63);
        s[j + 4] |= static_cast<uint8_t>(f.mn[j] & 63);
      } else {
        s[j + 4] = static_cast<uint8_t>((f.sc[j] & 0xF) | ((f.mn[j] & 0xF) << 4));
        s[j - 4] |= static_cast<uint8_t>((f.sc[j] >> 4) << 6);
        s[j] |= static_cast<uint8_t>((f.mn[j] >> 4) << 6);
      }
    }
    uint8_t* qs = b + (kFifthBit ? 48 : 16);
    for (int g = 0; g < 8; ++g) {
      const float dl = f.d * static_cast<float>(f.sc[g]), ml = f.dmin * static_cast<float>(f.mn[g]);
      for (int l = 0; l < 32; ++l) {
        const int q = code_for(x[32 * g + l], dl, -ml, 0, kMax);
        qs[32 * (g / 2) + l] |= static_cast<uint8_t>((q & 0xF) << (4 * (g % 2)));
        if constexpr (kFifthBit) b[16 + l] |= static_cast<uint8_t>((q >> 4) << g);
      }
    }
  }
}
void quantize_row_q4_k(const float* x, void* dst, int64_t n) { quantize_row_q45_k<false>(x, static_cast<uint8_t*>(dst), n); }
// A CPU layout: its file type's codes, one 256-value unit at a time, repacked.
template <void (*kQuantize)(const float*, void*, int64_t), void (*kRepack)(const void*, void*, int64_t),
          int kFileBytes, int kLayoutBytes>
void quantize_row_layout(const float* x, void* dst, int64_t n) {
  uint8_t block[kFileBytes];
  for (int64_t i = 0; i < n; i += 256) {
    kQuantize(x + i, block, 256);
    kRepack(block, static_cast<uint8_t*>(dst) + i / 256 * kLayoutBytes, 256);
  }
}
void quantize_row_q4_k_r(const float* x, void* dst, int64_t n) {
  quantize_row_layout<quantize_row_q4_k, repack_row_q4_k_r, 144, 148>(x, dst, n);
}
void quantize_row_q5_k_r(const float* x, void* dst, int64_t n) {
  quantize_row_layout<quantize_row_q5_k, repack_row_q5_k_r, 176, 180>(x, dst, n);
}
void quantize_row_q6_k_r(const float* x, void* dst, int64_t n) {
  quantize_row_layout<quantize_row_q6_k, repack_row_q6_k_r, 210, 210>(x, dst, n);
}
void quantize_row_q5_k(const float* x, void* dst, int64_t n) { quantize_row_q45_k<true>(x, static_cast<uint8_t*>(dst), n); }

// Symmetric K-types: per 16-value sub-block signed scales, stored as signed
// codes in [-code_max-1, code_max] of one super-block d.
void fit_k_symmetric(const float* x, int qmin, int qmax, int code_max, float& d, int* sc) {
  int q[16];
  float scale[16], amax = 0, m = 0;
  for (int j = 0; j < 16; ++j) {
    scale[j] = fit_symmetric(x + 16 * j, 16, qmin, qmax, q);
    if (std::fabs(scale[j]) > amax) amax = std::fabs(scale[j]), m = scale[j];
  }
  // The largest scale maps to the negative end code, which has one more level.
  d = round_half(amax == 0 ? 0 : m / static_cast<float>(-code_max - 1));
  for (int j = 0; j < 16; ++j) sc[j] = d != 0 ? std::clamp(nearest_int(scale[j] / d), -code_max - 1, code_max) : 0;
}

void quantize_row_q3_k(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<uint8_t*>(dst);
  for (; n > 0; n -= 256, x += 256, b += 110) {
    std::memset(b, 0, 110);
    float d;
    int sc[16];
    fit_k_symmetric(x, -4, 3, 31, d, sc);
    put_half(b + 108, d);
    for (int j = 0; j < 16; ++j) {
      const int l = sc[j] + 32;
      if (j < 8) b[96 + j] |= static_cast<uint8_t>(l & 0xF);
      else b[96 + j - 8] |= static_cast<uint8_t>((l & 0xF) << 4);
      b[96 + 8 + j % 4] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
    }
    for (int g = 0; g < 8; ++g)
      for (int l = 0; l < 32; ++l) {
        const int q = code_for(x[32 * g + l], d * static_cast<float>(sc[2 * g + l / 16]), 0, -4, 3) + 4;
        b[32 + 32 * (g / 4) + l] |= static_cast<uint8_t>((q & 3) << (2 * (g % 4)));
        b[l] |= static_cast<uint8_t>((q >> 2) << g);
      }
  }
}

void quantize_row_q6_k(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<uint8_t*>(dst);
  for (; n > 0; n -= 256, x += 256, b += 210) {
    std::memset(b, 0, 210);
    float d;
    int sc[16];
    fit_k_symmetric(x, -32, 31, 127, d, sc);
    put_half(b + 208, d);
    for (int j = 0; j < 16; ++j) b[192 + j] = static_cast<uint8_t>(static_cast<int8_t>(sc[j]));
    for (int g = 0; g < 8; ++g) {
      const int h = g / 4, k = g % 4;
      for (int l = 0; l < 32; ++l) {
        const int v = code_for(x[32 * g + l], d * static_cast<float>(sc[2 * g + l / 16]), 0, -32, 31) + 32;
        b[64 * h + 32 * (k & 1) + l] |= static_cast<uint8_t>((v & 0xF) << (k < 2 ? 0 : 4));
        b[128 + 32 * h + l] |= static_cast<uint8_t>((v >> 4) << (2 * k));
      }
    }
  }
}

void quantize_row_iq4_xs(const float* x, void* dst, int64_t n) {
  auto* b = static_cast<uint8_t*>(dst);
  int idx[32];
  for (; n > 0; n -= 256, x += 256, b += 136) {
    std::memset(b, 0, 136);
    float scale[8], amax = 0, m = 0;
    for (int j = 0; j < 8; ++j) {
      scale[j] = fit_iq4(x + 32 * j, 32, idx);
      if (std::fabs(scale[j]) > amax) amax = std::fabs(scale[j]), m = scale[j];
    }
    const float d = round_half(amax == 0 ? 0 : m / -32.0f);
    put_half(b, d);
    uint16_t scales_h = 0;
    for (int j = 0; j < 8; ++j) {
      const int ls = (d != 0 ? std::clamp(nearest_int(scale[j] / d), -32, 31) : 0) + 32;
      scales_h = static_cast<uint16_t>(scales_h | ((ls >> 4) & 3) << (2 * j));
      b[4 + j / 2] |= static_cast<uint8_t>((ls & 0xF) << (4 * (j % 2)));
      const float dl = d * static_cast<float>(ls - 32);
      for (int i = 0; i < 32; ++i) idx[i] = nearest_iq4(dl == 0 ? 0 : x[32 * j + i] / dl);
      for (int i = 0; i < 16; ++i) b[8 + 16 * j + i] = static_cast<uint8_t>(idx[i] | (idx[i + 16] << 4));
    }
    b[2] = static_cast<uint8_t>(scales_h & 0xFF);
    b[3] = static_cast<uint8_t>(scales_h >> 8);
  }
}

}  // namespace gb::kernels
