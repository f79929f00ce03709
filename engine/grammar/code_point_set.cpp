// CodePointSet and the GBNF spellings of characters; see code_point_set.h.
#include "grammar/code_point_set.h"

#include <algorithm>
#include <cstdio>

namespace gb {
namespace {

constexpr uint32_t kSurrogateLo = 0xD800;
constexpr uint32_t kSurrogateHi = 0xDFFF;

// One class member: printable ASCII as itself (class metacharacters escaped),
// the rest as \xHH, \uHHHH or \UHHHHHHHH.
void append_class_char(std::string& out, uint32_t cp) {
  char buf[16];
  if (cp >= 0x20 && cp < 0x7f) {
    const char c = static_cast<char>(cp);
    if (c == ']' || c == '[' || c == '\\' || c == '^' || c == '-' || c == '"') out += '\\';
    out += c;
  } else if (cp < 0x80) {
    std::snprintf(buf, sizeof(buf), "\\x%02X", static_cast<unsigned>(cp));
    out += buf;
  } else if (cp <= 0xFFFF) {
    std::snprintf(buf, sizeof(buf), "\\u%04X", static_cast<unsigned>(cp));
    out += buf;
  } else {
    std::snprintf(buf, sizeof(buf), "\\U%08X", static_cast<unsigned>(cp));
    out += buf;
  }
}

// The code points JSON strings must escape: '"', '\' and U+0000..U+001F.
CodePointSet json_escaped_set() {
  CodePointSet set = CodePointSet::range(0, 0x1F);
  set.add(0x22, 0x22);
  set.add(0x5C, 0x5C);
  return set;
}

}  // namespace

CodePointSet CodePointSet::all() {
  CodePointSet set;
  set.ranges_ = {{0, kSurrogateLo - 1}, {kSurrogateHi + 1, kMaxCodePoint}};
  return set;
}

CodePointSet CodePointSet::range(uint32_t lo, uint32_t hi) {
  CodePointSet set;
  set.add(lo, hi);
  return set;
}

void CodePointSet::add(uint32_t lo, uint32_t hi) {
  hi = std::min(hi, kMaxCodePoint);
  if (lo > hi) return;
  // Split around the surrogates, which are never members.
  if (lo <= kSurrogateHi && hi >= kSurrogateLo) {
    if (lo < kSurrogateLo) add(lo, kSurrogateLo - 1);
    if (hi > kSurrogateHi) add(kSurrogateHi + 1, hi);
    return;
  }
  std::vector<CodePointRange> merged;
  merged.reserve(ranges_.size() + 1);
  CodePointRange fresh{lo, hi};
  bool placed = false;
  for (const CodePointRange& r : ranges_) {
    if (r.hi + 1 < fresh.lo) {
      merged.push_back(r);
    } else if (fresh.hi + 1 < r.lo) {
      if (!placed) merged.push_back(fresh);
      placed = true;
      merged.push_back(r);
    } else {
      fresh.lo = std::min(fresh.lo, r.lo);
      fresh.hi = std::max(fresh.hi, r.hi);
    }
  }
  if (!placed) merged.push_back(fresh);
  ranges_ = std::move(merged);
}

void CodePointSet::add(const CodePointSet& other) {
  for (const CodePointRange& r : other.ranges_) add(r.lo, r.hi);
}

CodePointSet CodePointSet::complement() const { return all().minus(*this); }

CodePointSet CodePointSet::minus(const CodePointSet& other) const {
  CodePointSet out;
  for (const CodePointRange& r : ranges_) {
    uint32_t lo = r.lo;
    bool done = false;
    for (const CodePointRange& o : other.ranges_) {
      if (o.hi < lo || o.lo > r.hi) continue;
      if (o.lo > lo) out.ranges_.push_back({lo, o.lo - 1});
      if (o.hi >= r.hi) { done = true; break; }
      lo = o.hi + 1;
    }
    if (!done) out.ranges_.push_back({lo, r.hi});
  }
  return out;
}

CodePointSet CodePointSet::intersect(const CodePointSet& other) const { return minus(minus(other)); }

bool CodePointSet::contains(uint32_t cp) const {
  for (const CodePointRange& r : ranges_)
    if (cp >= r.lo && cp <= r.hi) return true;
  return false;
}

bool CodePointSet::operator==(const CodePointSet& other) const {
  if (ranges_.size() != other.ranges_.size()) return false;
  for (size_t i = 0; i < ranges_.size(); ++i)
    if (ranges_[i].lo != other.ranges_[i].lo || ranges_[i].hi != other.ranges_[i].hi) return false;
  return true;
}

std::string CodePointSet::gbnf_class() const {
  std::string out = "[";
  for (const CodePointRange& r : ranges_) {
    append_class_char(out, r.lo);
    if (r.hi != r.lo) {
      if (r.hi != r.lo + 1) out += '-';
      append_class_char(out, r.hi);
    }
  }
  out += ']';
  return out;
}

std::string CodePointSet::gbnf_json_char() const {
  std::string out;
  const CodePointSet raw = minus(json_escaped_set());
  if (!raw.empty()) out = raw.gbnf_class();
  const CodePointSet escaped = intersect(json_escaped_set());
  for (const CodePointRange& r : escaped.ranges_) {
    for (uint32_t cp = r.lo; cp <= r.hi; ++cp) {
      if (!out.empty()) out += " | ";
      out += gbnf_literal(json_canonical_char(cp));
    }
  }
  return out;
}

std::string CodePointSet::key() const {
  std::string out;
  for (const CodePointRange& r : ranges_) out += std::to_string(r.lo) + "-" + std::to_string(r.hi) + ",";
  return out;
}

std::string json_canonical_char(uint32_t cp) {
  switch (cp) {
    case 0x22: return "\\\"";
    case 0x5C: return "\\\\";
    case 0x08: return "\\b";
    case 0x0C: return "\\f";
    case 0x0A: return "\\n";
    case 0x0D: return "\\r";
    case 0x09: return "\\t";
    default: break;
  }
  if (cp < 0x20) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
    return buf;
  }
  std::string out;
  append_utf8(out, cp);
  return out;
}



}  // namespace gb
