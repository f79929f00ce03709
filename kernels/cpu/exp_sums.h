// Softmax statistics of a logit row in one pass, for the sampler's per-token
// record (entropy and normaliser over a 32,000-token vocabulary every token):
//   z        = sum_i e_i,               e_i = exp(x_i - shift)
//   weighted = sum_i e_i (x_i - shift)  (entropy = log z - weighted / z)
// over x[0], x[stride], ..., x[(n-1) stride]; stride 2 reads the logit field of
// {int32 id, float logit} pairs (x points at the first logit; the SIMD path also
// reads the pair's id before it). Elements equal to -inf, or more than 87 below `shift`
// (e_i < 1.7e-38), add nothing. Sums are accumulated in double (the AVX2 path:
// float partial sums of 4 terms per lane, then double; relative error < 2e-7
// of the sum of the terms' magnitudes).
// An AVX2 path (polynomial exp, relative error < 2e-7 per term) runs when the
// CPU has it (cpu_info.h) for strides 1 and 2; exp_sums_reference is the scalar
// oracle (std::exp in double). Pure functions; any thread.
#pragma once

#include <cstdint>

namespace gb::kernels {

struct ExpSums {
  double z = 0.0;
  double weighted = 0.0;
};

ExpSums exp_sums(const float* x, int64_t n, int64_t stride, float shift);
ExpSums exp_sums_reference(const float* x, int64_t n, int64_t stride, float shift);

// Largest of x[0], x[stride], ... (-inf when n == 0); NaN-free input.
float max_strided(const float* x, int64_t n, int64_t stride);
float max_strided_reference(const float* x, int64_t n, int64_t stride);

// Skips ahead: returns an index r in [from, n] such that every element in
// [from, r) is below `threshold` and r == n or an element in [r, r + 8) is not
// (the caller then scans those 8). For top-N selection over a vocabulary.
int64_t skip_below(const float* x, int64_t n, int64_t stride, int64_t from, float threshold);
int64_t skip_below_reference(const float* x, int64_t n, int64_t stride, int64_t from, float threshold);

// The first index i in [0, n) with !(x[i] < limit) -- NaN counts, being not
// below anything -- or n when there is none. The sampler's input check (NaN and
// +inf logits) over a whole vocabulary every token.
int64_t find_not_below(const float* x, int64_t n, float limit);
int64_t find_not_below_reference(const float* x, int64_t n, float limit);

// The sampler's candidate array from a logit row: for each i with
// x[i] != -inf, in order, the pair {int32 id = i, float logit = x[i]} (8 bytes:
// out[2j] holds the id's bits, out[2j + 1] the logit). `out` has room for n
// pairs; returns how many were written.
int64_t fill_id_logit_pairs(const float* x, int64_t n, float* out);
int64_t fill_id_logit_pairs_reference(const float* x, int64_t n, float* out);

// True when exp_sums / max_strided take the AVX2 path for this stride.
bool exp_sums_has_simd(int64_t stride);

}  // namespace gb::kernels
