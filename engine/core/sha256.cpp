// SHA-256 following FIPS 180-4: padding (5.1.1), the message schedule and the
// compression function (6.2.2). The round constants K and the initial hash H(0)
// are derived here at compile time from their definitions (4.2.2, 5.3.3) — the
// first 32 bits of the fractional parts of the cube roots of the first 64 primes
// and of the square roots of the first 8 primes — instead of being typed in, so a
// typo cannot hide in a table. The standard's test vectors pin the result.
#include "core/sha256.h"

#include <cpuid.h>
#include <immintrin.h>

#include <cstdio>
#include <vector>

namespace gb {
namespace {

__extension__ using U128 = unsigned __int128;  // x^3 of a 36-bit x needs 108 bits

constexpr std::array<uint64_t, 64> first_primes() {
  std::array<uint64_t, 64> primes{};
  size_t n = 0;
  for (uint64_t c = 2; n < primes.size(); ++c) {
    bool prime = true;
    for (size_t i = 0; i < n && primes[i] * primes[i] <= c; ++i)
      if (c % primes[i] == 0) prime = false;
    if (prime) primes[n++] = c;
  }
  return primes;
}

// Largest x with x^power <= value, by bisection over [0, 2^bits).
constexpr uint64_t integer_root(U128 value, int power, int bits) {
  uint64_t lo = 0, hi = uint64_t{1} << bits;
  while (hi - lo > 1) {
    const uint64_t mid = lo + (hi - lo) / 2;
    U128 p = 1;
    for (int i = 0; i < power; ++i) p *= mid;
    if (p <= value) lo = mid; else hi = mid;
  }
  return lo;
}

// floor(root(prime) * 2^32) mod 2^32 = the fractional part's first 32 bits.
// sqrt(p) * 2^32 = sqrt(p * 2^64); cbrt(p) * 2^32 = cbrt(p * 2^96). Primes here
// are < 320, so cbrt < 7 and sqrt < 5: 35 and 35 bits suffice for the search.
constexpr uint32_t fraction_bits(uint64_t prime, int power) {
  const U128 scaled = U128{prime} << (32 * power);
  return static_cast<uint32_t>(integer_root(scaled, power, 36));
}

constexpr std::array<uint32_t, 64> make_round_constants() {
  const auto primes = first_primes();
  std::array<uint32_t, 64> k{};
  for (size_t i = 0; i < k.size(); ++i) k[i] = fraction_bits(primes[i], 3);
  return k;
}

constexpr std::array<uint32_t, 8> make_initial_hash() {
  const auto primes = first_primes();
  std::array<uint32_t, 8> h{};
  for (size_t i = 0; i < h.size(); ++i) h[i] = fraction_bits(primes[i], 2);
  return h;
}

constexpr std::array<uint32_t, 64> kRound = make_round_constants();
constexpr std::array<uint32_t, 8> kInitial = make_initial_hash();
// Spot checks against the values printed in FIPS 180-4 4.2.2 and 5.3.3.
static_assert(kRound[0] == 0x428a2f98u && kRound[63] == 0xc67178f2u);
static_assert(kInitial[0] == 0x6a09e667u && kInitial[7] == 0x5be0cd19u);

constexpr uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }
constexpr uint32_t ch(uint32_t x, uint32_t y, uint32_t z) { return (x & y) ^ (~x & z); }
constexpr uint32_t maj(uint32_t x, uint32_t y, uint32_t z) { return (x & y) ^ (x & z) ^ (y & z); }
constexpr uint32_t big_sigma0(uint32_t x) { return rotr(x, 2) ^ rotr(x, 13) ^ rotr(x, 22); }
constexpr uint32_t big_sigma1(uint32_t x) { return rotr(x, 6) ^ rotr(x, 11) ^ rotr(x, 25); }
constexpr uint32_t small_sigma0(uint32_t x) { return rotr(x, 7) ^ rotr(x, 18) ^ (x >> 3); }
constexpr uint32_t small_sigma1(uint32_t x) { return rotr(x, 17) ^ rotr(x, 19) ^ (x >> 10); }

// One block through the rounds as the standard writes them.
void compress_portable(std::array<uint32_t, 8>& state, const uint8_t* block) {
  std::array<uint32_t, 64> w{};  // (64) message schedule W_t
  for (int t = 0; t < 16; ++t)   // big-endian words of the block
    w[t] = (uint32_t{block[4 * t]} << 24) | (uint32_t{block[4 * t + 1]} << 16) |
           (uint32_t{block[4 * t + 2]} << 8) | uint32_t{block[4 * t + 3]};
  for (int t = 16; t < 64; ++t) w[t] = small_sigma1(w[t - 2]) + w[t - 7] + small_sigma0(w[t - 15]) + w[t - 16];

  uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
  uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
  for (int t = 0; t < 64; ++t) {
    const uint32_t t1 = h + big_sigma1(e) + ch(e, f, g) + kRound[t] + w[t];
    const uint32_t t2 = big_sigma0(a) + maj(a, b, c);
    h = g; g = f; f = e; e = d + t1;
    d = c; c = b; b = a; a = t1 + t2;
  }
  state[0] += a; state[1] += b; state[2] += c; state[3] += d;
  state[4] += e; state[5] += f; state[6] += g; state[7] += h;
}

// The rounds of 6.2.2 on the processor's SHA instructions (Intel SHA
// Extensions). The state lives in two registers as (a, b, e, f) and (c, d, g,
// h), the order sha256rnds2 reads; each sha256rnds2 does two rounds from two
// W_t + K_t sums in the low half of its third operand. The schedule (6.2.2 step
// 1) four words at a time: sha256msg1 adds sigma0(W_{t-15}) to W_{t-16}, the
// alignr supplies W_{t-7}, and sha256msg2 adds sigma1(W_{t-2}).
[[gnu::target("sha,sse4.1")]] void compress_sha_ni(std::array<uint32_t, 8>& state, const uint8_t* p,
                                                   size_t num_blocks) {
  const __m128i dcba = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&state[0]));  // lane i = state[i]
  const __m128i hgfe = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&state[4]));
  const __m128i badc = _mm_shuffle_epi32(dcba, 0xB1);    // lanes b, a, d, c (low to high)
  const __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);    // lanes h, g, f, e
  __m128i abef = _mm_alignr_epi8(badc, efgh, 8);         // lanes f, e, b, a
  __m128i cdgh = _mm_blend_epi16(efgh, badc, 0xF0);      // lanes h, g, d, c
  // Bytes of each 32-bit word reversed (the message is big-endian).
  const __m128i swap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);
  for (; num_blocks > 0; --num_blocks, p += 64) {
    const __m128i abef_in = abef, cdgh_in = cdgh;
    __m128i w[4];
    for (int g = 0; g < 16; ++g) {  // rounds 4g .. 4g + 3
      __m128i& wg = w[g % 4];
      if (g < 4) {
        wg = _mm_shuffle_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * g)), swap);
      } else {
        const __m128i t = _mm_add_epi32(_mm_sha256msg1_epu32(w[g % 4], w[(g + 1) % 4]),
                                        _mm_alignr_epi8(w[(g + 3) % 4], w[(g + 2) % 4], 4));
        wg = _mm_sha256msg2_epu32(t, w[(g + 3) % 4]);
      }
      const __m128i k = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&kRound[4 * g]));
      const __m128i wk = _mm_add_epi32(wg, k);
      cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk);
      abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(wk, 0x0E));
    }
    abef = _mm_add_epi32(abef, abef_in);
    cdgh = _mm_add_epi32(cdgh, cdgh_in);
  }
  const __m128i feba = _mm_shuffle_epi32(abef, 0x1B);  // lanes a, b, e, f
  const __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);  // lanes g, h, c, d
  _mm_storeu_si128(reinterpret_cast<__m128i*>(&state[0]), _mm_blend_epi16(feba, dchg, 0xF0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(&state[4]), _mm_alignr_epi8(dchg, feba, 8));
}

}  // namespace

void Sha256::reset() {
  state_ = kInitial;
  num_buffered_ = 0;
  num_bytes_ = 0;
  finished_ = false;
}

bool Sha256::hardware_available() {
  static const bool available = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_max(0, nullptr) < 7 || !__get_cpuid(1, &a, &b, &c, &d)) return false;
    const bool sse41 = (c & bit_SSE4_1) != 0;
    __cpuid_count(7, 0, a, b, c, d);
    return sse41 && (b & (1u << 29)) != 0;  // SHA
  }();
  return available;
}

void Sha256::compress(const uint8_t* blocks, size_t num_blocks) {
  if (use_hardware_) {
    compress_sha_ni(state_, blocks, num_blocks);
    return;
  }
  for (; num_blocks > 0; --num_blocks, blocks += 64) compress_portable(state_, blocks);
}

void Sha256::update(std::span<const std::byte> bytes) {
  GB_CHECK_MSG(!finished_, "Sha256::update after finish (call reset)");
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  size_t n = bytes.size();
  num_bytes_ += n;
  if (num_buffered_ > 0) {  // top up a partial block first
    const size_t take = std::min(n, buffer_.size() - num_buffered_);
    std::copy(p, p + take, buffer_.begin() + static_cast<ptrdiff_t>(num_buffered_));
    num_buffered_ += take; p += take; n -= take;
    if (num_buffered_ < buffer_.size()) return;
    compress(buffer_.data(), 1);
    num_buffered_ = 0;
  }
  compress(p, n / 64);
  p += n / 64 * 64;
  n %= 64;
  std::copy(p, p + n, buffer_.begin());
  num_buffered_ = n;
}

Sha256::Digest Sha256::finish() {
  GB_CHECK_MSG(!finished_, "Sha256::finish called twice");
  // Padding (5.1.1): a 1 bit, zeros up to 56 mod 64 bytes, then the message length
  // in bits as a 64-bit big-endian number.
  const uint64_t num_bits = num_bytes_ * 8;
  uint8_t pad[72] = {0x80};
  const size_t num_pad = (num_buffered_ < 56 ? 56 : 120) - num_buffered_;
  for (int i = 0; i < 8; ++i) pad[num_pad + i] = static_cast<uint8_t>(num_bits >> (56 - 8 * i));
  update(std::as_bytes(std::span(pad, num_pad + 8)));
  GB_CHECK(num_buffered_ == 0);
  finished_ = true;
  Digest out{};
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 4; ++j) out[4 * i + j] = static_cast<uint8_t>(state_[i] >> (24 - 8 * j));
  return out;
}

std::string Sha256::hex(const Digest& digest) {
  static const char kHex[] = "0123456789abcdef";
  std::string s;
  s.reserve(64);
  for (uint8_t b : digest) { s += kHex[b >> 4]; s += kHex[b & 15]; }
  return s;
}

std::string sha256_hex(std::string_view text) {
  Sha256 h;
  h.update(text);
  return Sha256::hex(h.finish());
}

Result<std::string> sha256_file_hex(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return make_error(path + ": cannot open for hashing");
  Sha256 h;
  std::vector<std::byte> buf(size_t{1} << 20);  // (1 MiB) read buffer
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) h.update(std::span(buf.data(), n));
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return make_error(path + ": read error while hashing");
  return Sha256::hex(h.finish());
}

}  // namespace gb
