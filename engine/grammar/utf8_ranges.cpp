// Code-point ranges to UTF-8 byte-range runs (see utf8_ranges.h).
#include "grammar/utf8_ranges.h"

#include <algorithm>

namespace gb {

std::vector<CodePointRange> normalize_ranges(std::vector<CodePointRange> ranges) {
  std::sort(ranges.begin(), ranges.end(), [](const CodePointRange& a, const CodePointRange& b) { return a.lo < b.lo; });
  std::vector<CodePointRange> out;
  for (const CodePointRange& r : ranges) {
    if (!out.empty() && r.lo <= out.back().hi + 1) out.back().hi = std::max(out.back().hi, r.hi);
    else out.push_back(r);
  }
  return out;
}

std::vector<CodePointRange> remove_surrogates(const std::vector<CodePointRange>& ranges) {
  std::vector<CodePointRange> out;
  for (const CodePointRange& r : ranges) {
    if (r.hi < 0xD800 || r.lo > 0xDFFF) {
      out.push_back(r);
      continue;
    }
    if (r.lo < 0xD800) out.push_back({r.lo, 0xD7FF});
    if (r.hi > 0xDFFF) out.push_back({0xE000, r.hi});
  }
  return out;
}

std::vector<CodePointRange> complement_ranges(const std::vector<CodePointRange>& ranges) {
  std::vector<CodePointRange> out;
  uint32_t next = 0;
  for (const CodePointRange& r : ranges) {
    if (r.lo > next) out.push_back({next, r.lo - 1});
    next = std::max(next, r.hi + 1);
  }
  if (next <= 0x10FFFF) out.push_back({next, 0x10FFFF});
  return remove_surrogates(out);
}

namespace {

void split_range(uint32_t lo, uint32_t hi, std::vector<Utf8ByteRun>& out) {
  if (lo > hi) return;
  // One encoded length per piece.
  for (uint32_t edge : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= edge && hi > edge) {
      split_range(lo, edge, out);
      split_range(edge + 1, hi, out);
      return;
    }
  }
  if (hi < 0x80) {
    out.push_back({ByteRange{static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)}});
    return;
  }
  const int n = utf8_length(lo);
  // Align so that every trailing 6-bit group spans its full range or is fixed.
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_range(lo, lo | m, out);
        split_range((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split_range(lo, (hi & ~m) - 1, out);
        split_range(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4];
  uint8_t b[4];
  encode_utf8(lo, a);
  encode_utf8(hi, b);
  Utf8ByteRun run;
  for (int i = 0; i < n; ++i) run.push_back({a[i], b[i]});
  out.push_back(std::move(run));
}

}  // namespace

std::vector<Utf8ByteRun> utf8_byte_runs(const std::vector<CodePointRange>& ranges) {
  std::vector<Utf8ByteRun> out;
  for (const CodePointRange& r : ranges) split_range(r.lo, r.hi, out);
  return out;
}

}  // namespace gb
