#include "cpu/kv_type.h"

#include <array>
#include <cctype>

namespace gb::kernels {

namespace {

constexpr std::array<KvTypeRow, 7> kRows = {{
    {WeightType::F32, KvElem::F32, "f32", true, "float32: exact, 4 bytes per value"},
    {WeightType::F16, KvElem::F16, "f16", false, "IEEE half: 2 bytes per value (default)"},
    {WeightType::BF16, KvElem::BF16, "bf16", false, "bfloat16: 2 bytes per value, float32's range, 8-bit mantissa"},
    {WeightType::Q8_0, KvElem::Q8_0, "q8_0", false, "8-bit codes, one f16 scale per 32 values: 1.06 bytes per value"},
    {WeightType::Q4_0, KvElem::Q4_0, "q4_0", false, "4-bit codes, one f16 scale per 32 values: 0.56 bytes per value"},
    {WeightType::Q4_1, KvElem::Q4_1, "q4_1", false, "4-bit codes, f16 scale and offset per 32 values: 0.63 bytes per value"},
    {WeightType::IQ4_NL, KvElem::IQ4_NL, "iq4_nl", false, "4-bit non-linear codes, one f16 scale per 32 values: 0.56 bytes per value"},
}};

bool iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

}  // namespace

std::span<const KvTypeRow> kv_type_rows() { return kRows; }

const KvTypeRow* kv_type_row(WeightType t) {
  for (const KvTypeRow& r : kRows)
    if (r.type == t) return &r;
  return nullptr;
}

std::optional<WeightType> kv_type_from_name(std::string_view name) {
  for (const KvTypeRow& r : kRows)
    if (iequal(r.name, name)) return r.type;
  return std::nullopt;
}

std::string_view kv_type_name(WeightType t) {
  const KvTypeRow* r = kv_type_row(t);
  return r != nullptr ? r->name : "?";
}

std::string kv_type_names() {
  std::string out;
  for (const KvTypeRow& r : kRows) {
    if (!out.empty()) out += ", ";
    out += r.name;
  }
  return out;
}

size_t kv_row_bytes(WeightType t, int64_t kv_dim) {
  const WeightTypeTraits& w = weight_traits(t);
  return static_cast<size_t>(kv_dim / w.block_elements) * static_cast<size_t>(w.block_bytes);
}

std::string kv_type_unsupported(WeightType t, int64_t kv_dim) {
  if (kv_type_row(t) == nullptr)
    return std::string(weight_traits(t).name) + " is not a KV type (" + kv_type_names() + ")";
  const int32_t block = weight_traits(t).block_elements;
  if (kv_dim <= 0 || kv_dim % block != 0)
    return std::string(kv_type_name(t)) + " stores blocks of " + std::to_string(block) +
           " values; this model's K/V rows hold " + std::to_string(kv_dim);
  return {};
}

}  // namespace gb::kernels
