// GGUF parsing and validation. The parser never allocates from a count it has
// not first bounded by the bytes left in the file: an element of an array takes
// at least gguf_scalar_bytes (or 8 for a string length, 12 for a nested array
// header), so `count * min_bytes <= remaining` caps every reservation at the
// file size.
#include "model/gguf_file.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <unordered_set>

#include "model/byte_cursor.h"
#include "model/mapped_file.h"

namespace gb {

namespace {

constexpr uint64_t kMaxKeyBytes = 65535;          // the spec's key limit
constexpr uint64_t kMaxTensorNameBytes = 256;     // spec says 64; allow some slack
constexpr uint32_t kMaxArrayDepth = 8;            // nested arrays deeper than this are absurd
constexpr uint64_t kMaxNestedArrays = 1u << 20;   // total nested array objects per file
constexpr uint64_t kMaxAlignment = 1u << 20;

constexpr uint64_t kMinKvBytes = 8 + 4 + 1;          // empty key, type, a u8 value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // empty name, n_dims 0, type, offset

}  // namespace

std::string ggml_type_label(uint32_t code) {
  const std::string_view name = kernels::ggml_type_name(code);
  if (!name.empty()) return std::string(name) + " (ggml type " + std::to_string(code) + ")";
  return "unknown ggml type " + std::to_string(code);
}

std::string supported_type_list() {
  std::string s;
  for (int i = 0; i < kernels::kNumWeightTypes; ++i) {
    const auto t = static_cast<kernels::WeightType>(i);
    if (kernels::is_file_type(t)) s += (s.empty() ? "" : ", ") + std::string(kernels::weight_traits(t).name);
  }
  return s;
}

uint64_t GgufTensorInfo::num_elements() const {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;  // bounded by the parser (no overflow)
  return n;
}

class GgufParser {
 public:
  GgufParser(GgufFile& out, ByteCursor& cur) : out_(out), cur_(cur) {}

  Status parse(const GgufReadOptions& options) {
    uint32_t magic = 0;
    GB_TRY(cur_.read(magic, "GGUF magic"));
    if (magic != kGgufMagic) return fail("not a GGUF file (bad magic)");
    GB_TRY(cur_.read(out_.version_, "GGUF version"));
    if (out_.version_ != 2 && out_.version_ != 3)
      return fail("unsupported GGUF version " + std::to_string(out_.version_) +
                  " (only versions 2 and 3 are supported)");
    uint64_t num_tensors = 0, num_kv = 0;
    GB_TRY(cur_.read(num_tensors, "tensor count"));
    GB_TRY(cur_.read(num_kv, "metadata count"));
    // Each entry takes a minimum number of bytes, so a count that could not fit
    // in what is left of the file is a forged or truncated header.
    if (num_kv > cur_.remaining() / kMinKvBytes)
      return fail("truncated or corrupt header: metadata count " + std::to_string(num_kv) +
                  " cannot fit in the file (" + std::to_string(cur_.remaining()) + " bytes remain)");
    if (num_tensors > (cur_.remaining() - num_kv * kMinKvBytes) / kMinTensorInfoBytes)
      return fail("truncated or corrupt header: tensor count " + std::to_string(num_tensors) +
                  " cannot fit in the file (" + std::to_string(cur_.remaining()) + " bytes remain)");

    out_.metadata_.reserve(num_kv);
    for (uint64_t i = 0; i < num_kv; ++i) GB_TRY(read_kv());
    GB_TRY(read_alignment());
    if (options.metadata_only) return Status::success();

    out_.tensors_.reserve(num_tensors);
    for (uint64_t i = 0; i < num_tensors; ++i) GB_TRY(read_tensor_info());
    const uint64_t a = out_.alignment_;
    out_.data_offset_ = (cur_.offset() + a - 1) / a * a;
    if (num_tensors > 0 && out_.data_offset_ > cur_.size_bytes())
      return fail("truncated file: the tensor data section (offset " + std::to_string(out_.data_offset_) +
                  ") starts past the end of the file");
    return check_tensor_ranges();
  }

 private:
  Error fail(const std::string& problem) const { return make_error(cur_.path() + ": " + problem); }

  Status read_string(std::string& s, uint64_t max_bytes, const char* what) {
    uint64_t n = 0;
    GB_TRY(cur_.read(n, what));
    if (n > cur_.remaining())
      return fail(std::string(what) + " length " + std::to_string(n) + " at offset " +
                  std::to_string(cur_.offset() - 8) + " runs past the end of the file (" +
                  std::to_string(cur_.remaining()) + " bytes remain)");
    if (n > max_bytes) return fail(std::string(what) + " length " + std::to_string(n) + " exceeds the limit");
    return cur_.read_string(n, s, what);
  }

  Status read_kv() {
    std::string key;
    GB_TRY(read_string(key, kMaxKeyBytes, "metadata key"));
    uint32_t code = 0;
    GB_TRY(cur_.read(code, "metadata value type"));
    auto type = gguf_type_from_code(code);
    if (!type) return fail("metadata key '" + key + "' has unknown value type " + std::to_string(code));
    GgufValue value;
    GB_TRY(read_value(*type, value, key, 0));
    if (!keys_seen_.insert(key).second) return fail("duplicate metadata key '" + key + "'");
    out_.metadata_.emplace_back(std::move(key), std::move(value));
    return Status::success();
  }

  Status read_value(GgufType type, GgufValue& value, const std::string& key, uint32_t depth) {
    value.type = type;
    if (type == GgufType::String) return read_string(value.string, UINT64_MAX, "metadata string");
    if (type != GgufType::Array) {
      const size_t n = gguf_scalar_bytes(type);
      GB_TRY(cur_.need(n, "metadata value"));
      std::memcpy(&value.scalar_bits, cur_.current(), n);
      return cur_.skip(n, "metadata value");
    }
    if (depth >= kMaxArrayDepth) return fail("metadata key '" + key + "' nests arrays too deeply");
    uint32_t code = 0;
    uint64_t count = 0;
    GB_TRY(cur_.read(code, "array element type"));
    auto element = gguf_type_from_code(code);
    if (!element) return fail("metadata key '" + key + "' has unknown array element type " + std::to_string(code));
    GB_TRY(cur_.read(count, "array length"));
    value.element_type = *element;
    const uint64_t min_bytes = *element == GgufType::String ? 8
                               : *element == GgufType::Array ? 12 : gguf_scalar_bytes(*element);
    if (count > cur_.remaining() / min_bytes)
      return fail("metadata key '" + key + "': array length " + std::to_string(count) +
                  " runs past the end of the file (" + std::to_string(cur_.remaining()) + " bytes remain)");
    if (*element == GgufType::String) {
      value.strings.resize(count);
      for (auto& s : value.strings) GB_TRY(read_string(s, UINT64_MAX, "metadata string"));
    } else if (*element == GgufType::Array) {
      num_nested_arrays_ += count;
      if (num_nested_arrays_ > kMaxNestedArrays)
        return fail("metadata key '" + key + "' holds too many nested arrays");
      value.arrays.resize(count);
      for (auto& a : value.arrays) GB_TRY(read_value(GgufType::Array, a, key, depth + 1));
    } else {
      const uint64_t n = count * min_bytes;
      value.packed.resize(n);
      if (n > 0) std::memcpy(value.packed.data(), cur_.current(), n);
      GB_TRY(cur_.skip(n, "array data"));
    }
    return Status::success();
  }

  Status read_alignment() {
    const GgufValue* v = out_.find("general.alignment");
    if (v == nullptr) return Status::success();
    auto a = v->as_uint();
    if (v->type != GgufType::Uint32 || !a)
      return fail("general.alignment must be a uint32 (found " + std::string(gguf_type_name(v->type)) + ")");
    if (*a == 0 || *a % 8 != 0 || *a > kMaxAlignment)
      return fail("general.alignment " + std::to_string(*a) + " is not a positive multiple of 8");
    out_.alignment_ = static_cast<uint32_t>(*a);
    return Status::success();
  }

  Status read_tensor_info() {
    GgufTensorInfo t;
    GB_TRY(read_string(t.name, kMaxTensorNameBytes, "tensor name"));
    uint32_t num_dims = 0;
    GB_TRY(cur_.read(num_dims, "tensor dimension count"));
    if (num_dims == 0 || num_dims > kGgufMaxDims)
      return fail("tensor " + t.name + " has " + std::to_string(num_dims) + " dimensions (1 to 4 allowed)");
    t.dims.resize(num_dims);
    uint64_t num_elements = 1;
    for (auto& d : t.dims) {
      GB_TRY(cur_.read(d, "tensor dimension"));
      // No tensor type packs more than 8 elements per byte, so a tensor with
      // more elements than 8 x the file size cannot be stored in it. The
      // division keeps the running product from overflowing.
      const uint64_t max_elements = cur_.size_bytes() * 8;
      if (d == 0) return fail("tensor " + t.name + " has an absurd dimension 0");
      if (d > max_elements / num_elements)
        return fail("tensor " + t.name + " has an absurd dimension " + std::to_string(d) +
                    " (more elements than the file could hold)");
      num_elements *= d;
    }
    GB_TRY(cur_.read(t.ggml_type, "tensor type"));
    GB_TRY(cur_.read(t.offset, "tensor offset"));
    auto dtype = dtype_from_gguf(t.ggml_type);
    if (!dtype)
      return fail("tensor " + t.name + " has type " + ggml_type_label(t.ggml_type) +
                  ", which Glassbox cannot run (supported: " + supported_type_list() + ")");
    t.dtype = *dtype;
    // Blocks never straddle rows: the row length (ne[0]) must be whole blocks.
    const WeightTypeInfo info = dtype_info(t.dtype);
    if (t.dims[0] % info.block_elements != 0)
      return fail("tensor " + t.name + " has rows of " + std::to_string(t.dims[0]) + " values, not a whole number of " +
                  std::string(info.name) + " blocks of " + std::to_string(info.block_elements));
    auto bytes = dtype_bytes(t.dtype, num_elements);
    if (!bytes) return fail("tensor " + t.name + " is not a whole number of " + std::string(info.name) + " blocks");
    t.num_bytes = *bytes;
    if (!tensor_names_seen_.insert(t.name).second) return fail("duplicate tensor name " + t.name);
    out_.tensors_.push_back(std::move(t));
    return Status::success();
  }

  Status check_tensor_ranges() {
    const uint64_t data_bytes = cur_.size_bytes() - std::min<uint64_t>(out_.data_offset_, cur_.size_bytes());
    for (const auto& t : out_.tensors_) {
      if (t.offset % out_.alignment_ != 0)
        return fail("tensor " + t.name + " data offset " + std::to_string(t.offset) +
                    " is misaligned (not a multiple of the alignment " + std::to_string(out_.alignment_) + ")");
      if (t.offset >= data_bytes)
        return fail("tensor " + t.name + " data offset " + std::to_string(t.offset) +
                    " is past the end of the file (data section holds " + std::to_string(data_bytes) + " bytes)");
      if (t.num_bytes > data_bytes - t.offset)
        return fail("truncated tensor data: tensor " + t.name + " needs " + std::to_string(t.num_bytes) +
                    " bytes at data offset " + std::to_string(t.offset) + " but only " +
                    std::to_string(data_bytes - t.offset) + " remain in the file");
    }
    std::vector<const GgufTensorInfo*> by_offset;
    for (const auto& t : out_.tensors_) by_offset.push_back(&t);
    std::sort(by_offset.begin(), by_offset.end(),
              [](const auto* a, const auto* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < by_offset.size(); ++i)
      if (by_offset[i - 1]->offset + by_offset[i - 1]->num_bytes > by_offset[i]->offset)
        return fail("tensors " + by_offset[i - 1]->name + " and " + by_offset[i]->name + " overlap");
    return Status::success();
  }

  GgufFile& out_;
  ByteCursor& cur_;
  uint64_t num_nested_arrays_ = 0;
  std::unordered_set<std::string> keys_seen_;
  std::unordered_set<std::string> tensor_names_seen_;
};

Result<GgufFile> GgufFile::open(const std::string& path, const GgufReadOptions& options) {
  auto file = MappedFile::open(path);
  if (!file) return file.error();
  return parse(std::move(file.value()), options);
}

Result<GgufFile> GgufFile::parse(std::shared_ptr<const MappedFile> file, const GgufReadOptions& options) {
  GgufFile out;
  out.file_ = std::move(file);
  ByteCursor cur(out.file_->bytes(), out.file_->path());
  GgufParser parser(out, cur);
  GB_TRY(parser.parse(options));
  return out;
}

const std::string& GgufFile::path() const { return file_->path(); }

const GgufValue* GgufFile::find(std::string_view key) const {
  for (const auto& [k, v] : metadata_)
    if (k == key) return &v;
  return nullptr;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

const std::byte* GgufFile::tensor_data(const GgufTensorInfo& tensor) const {
  return file_->data() + data_offset_ + tensor.offset;
}

}  // namespace gb
