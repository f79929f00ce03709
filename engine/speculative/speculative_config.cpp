#include "speculative/speculative_config.h"

#include <algorithm>
#include <charconv>
#include <vector>

namespace gb {

const char* drafter_kind_name(DrafterKind kind) {
  switch (kind) {
    case DrafterKind::Ngram: return "ngram";
    case DrafterKind::DraftModel: return "draft";
    case DrafterKind::SelfDraft: return "self";
    case DrafterKind::Custom: return "custom";
  }
  return "?";
}

namespace {

Result<int32_t> parse_int(std::string_view text, std::string_view what) {
  int32_t v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size())
    return make_error("--speculative: " + std::string(what) + " must be an integer, got '" + std::string(text) + "'");
  return v;
}

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    const size_t at = text.find(sep, start);
    out.push_back(text.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

// True when every comma-separated item looks like key=value (a draft path's
// options part is recognised by this).
bool looks_like_options(std::string_view text) {
  if (text.empty()) return false;
  for (std::string_view item : split(text, ','))
    if (item.find('=') == std::string_view::npos || item.front() == '=') return false;
  return true;
}

Status apply_options(std::string_view text, SpeculativeConfig& c) {
  for (std::string_view item : split(text, ',')) {
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) return make_error("--speculative: option '" + std::string(item) + "' is not key=value");
    const std::string_view key = item.substr(0, eq);
    const std::string_view value = item.substr(eq + 1);
    if (key == "fallback") {
      // timing: compare measured ms per token (default); accept: decide on
      // acceptance only (timing-free, repeatable); off: always draft, fixed k.
      if (value == "timing") c.timing_fallback = true;
      else if (value == "accept") c.timing_fallback = false;
      else if (value == "off") c.adaptive = false;
      else return make_error("--speculative: fallback must be timing, accept or off, got '" + std::string(value) + "'");
      continue;
    }
    auto v = parse_int(value, key);
    if (!v) return v.error();
    if (key == "k") c.k = *v;
    else if (key == "k_min") c.k_min = *v;
    else if (key == "k_max") c.k_max = *v;
    else if (key == "n" && c.kind == DrafterKind::Ngram) c.ngram_n = *v;
    else
      return make_error("--speculative: unknown option '" + std::string(key) + "' for the " +
                        drafter_kind_name(c.kind) + " drafter (known: k, k_min, k_max, fallback" +
                        (c.kind == DrafterKind::Ngram ? ", n)" : ")"));
  }
  return {};
}

}  // namespace

Result<SpeculativeConfig> parse_speculative_spec(std::string_view spec) {
  SpeculativeConfig c;
  const size_t colon = spec.find(':');
  const std::string_view kind = spec.substr(0, colon);
  const std::string_view rest = colon == std::string_view::npos ? std::string_view{} : spec.substr(colon + 1);
  std::string_view options;
  if (kind == "ngram") {
    c.kind = DrafterKind::Ngram;
    options = rest;
  } else if (kind == "draft") {
    c.kind = DrafterKind::DraftModel;
    const size_t last = rest.rfind(':');
    if (last != std::string_view::npos && looks_like_options(rest.substr(last + 1))) {
      c.draft_path = std::string(rest.substr(0, last));
      options = rest.substr(last + 1);
    } else {
      c.draft_path = std::string(rest);
    }
    if (c.draft_path.empty()) return make_error("--speculative: draft needs a model path (draft:PATH[:k=K])");
  } else if (kind == "self") {
    c.kind = DrafterKind::SelfDraft;
    const size_t next = rest.find(':');
    const std::string_view layers = rest.substr(0, next);
    if (layers.empty()) return make_error("--speculative: self needs a layer count (self:LAYERS[:k=K])");
    auto n = parse_int(layers, "the self-draft layer count");
    if (!n) return n.error();
    c.self_layers = *n;
    if (c.self_layers < 1) return make_error("--speculative: self-draft layer count must be at least 1");
    if (next != std::string_view::npos) options = rest.substr(next + 1);
  } else {
    return make_error("--speculative: unknown drafter '" + std::string(kind) +
                      "' (expected ngram[:n=N,k=K], draft:PATH[:k=K] or self:LAYERS[:k=K])");
  }
  if (!options.empty()) GB_TRY(apply_options(options, c));
  if (c.k_min < 1 || c.k_max < c.k_min || c.k_max > 64)
    return make_error("--speculative: need 1 <= k_min <= k_max <= 64, got k_min=" + std::to_string(c.k_min) +
                      " k_max=" + std::to_string(c.k_max));
  if (c.k < c.k_min || c.k > c.k_max) {
    // An explicit k outside the default bounds widens them rather than failing.
    if (c.k < 1 || c.k > 64) return make_error("--speculative: k must be in 1..64, got " + std::to_string(c.k));
    c.k_min = std::min(c.k_min, c.k);
    c.k_max = std::max(c.k_max, c.k);
  }
  if (c.kind == DrafterKind::Ngram && (c.ngram_n < 1 || c.ngram_n > 64))
    return make_error("--speculative: ngram n must be in 1..64, got " + std::to_string(c.ngram_n));
  return c;
}

std::string describe(const SpeculativeConfig& c) {
  std::string s = drafter_kind_name(c.kind);
  if (c.kind == DrafterKind::Ngram) s += " n=" + std::to_string(c.ngram_n);
  if (c.kind == DrafterKind::DraftModel) s += " " + c.draft_path;
  if (c.kind == DrafterKind::SelfDraft) s += " layers=" + std::to_string(c.self_layers);
  if (c.kind == DrafterKind::Custom) s += " " + c.custom_name;
  s += " k=" + std::to_string(c.k) + " [" + std::to_string(c.k_min) + "," + std::to_string(c.k_max) + "]";
  return s;
}

}  // namespace gb
