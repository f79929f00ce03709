// GgufWriter: header and metadata first, then tensor infos with offsets laid
// out back to back (each rounded up to the alignment), padding, then the data.
#include "model/gguf_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "core/check.h"
#include "model/gguf_file.h"

namespace gb {

namespace {

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// A FILE* with an error flag; the first failed write is remembered and every
// later write is skipped, so callers check once at the end.
class OutFile {
 public:
  explicit OutFile(const std::string& path) : f_(std::fopen(path.c_str(), "wb")) {
    if (f_ == nullptr) err_ = errno;
    else std::setvbuf(f_, nullptr, _IOFBF, 1 << 20);
  }
  ~OutFile() { if (f_) std::fclose(f_); }
  bool ok() const { return err_ == 0; }
  int error_code() const { return err_; }

  void bytes(const void* p, size_t n) {
    if (!ok() || n == 0) return;
    if (std::fwrite(p, 1, n, f_) != n) err_ = errno ? errno : EIO;
    position_ += n;
  }
  template <class T>
  void pod(T v) { bytes(&v, sizeof v); }
  void string(const std::string& s) {
    pod<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  void zeros(uint64_t n) {
    static const char kZero[64] = {};
    while (n > 0) {
      const size_t k = static_cast<size_t>(std::min<uint64_t>(n, sizeof kZero));
      bytes(kZero, k);
      n -= k;
    }
  }
  uint64_t position() const { return position_; }
  int close() {
    if (f_ && std::fclose(f_) != 0 && ok()) err_ = errno ? errno : EIO;
    f_ = nullptr;
    return err_;
  }

 private:
  std::FILE* f_;
  int err_ = 0;
  uint64_t position_ = 0;
};

void write_value(OutFile& out, const GgufValue& v) {
  if (v.type == GgufType::String) return out.string(v.string);
  if (v.type != GgufType::Array) return out.bytes(&v.scalar_bits, gguf_scalar_bytes(v.type));
  out.pod<uint32_t>(static_cast<uint32_t>(v.element_type));
  out.pod<uint64_t>(v.array_size());
  if (v.element_type == GgufType::String) {
    for (const auto& s : v.strings) out.string(s);
  } else if (v.element_type == GgufType::Array) {
    for (const auto& a : v.arrays) write_value(out, a);
  } else {
    out.bytes(v.packed.data(), v.packed.size());
  }
}

}  // namespace

GgufWriter::GgufWriter(uint32_t alignment, uint32_t version) : alignment_(alignment), version_(version) {
  GB_CHECK(alignment > 0);
  if (alignment != kGgufDefaultAlignment) add_metadata("general.alignment", GgufValue::u32(alignment));
}

void GgufWriter::add_metadata(std::string key, GgufValue value) {
  metadata_.emplace_back(std::move(key), std::move(value));
}

void GgufWriter::add_tensor(std::string name, std::vector<uint64_t> dims, uint32_t ggml_type, uint64_t num_bytes,
                            FillFn fill) {
  tensors_.push_back({std::move(name), std::move(dims), ggml_type, num_bytes, std::move(fill)});
}

void GgufWriter::add_tensor(std::string name, std::vector<uint64_t> dims, WeightType dtype, std::vector<std::byte> bytes) {
  auto shared = std::make_shared<std::vector<std::byte>>(std::move(bytes));
  const uint64_t n = shared->size();
  add_tensor(std::move(name), std::move(dims), dtype_info(dtype).gguf_code, n,
             [shared](std::span<std::byte> out) { std::memcpy(out.data(), shared->data(), out.size()); });
}

uint64_t GgufWriter::total_tensor_bytes() const {
  uint64_t n = 0;
  for (const auto& t : tensors_) n += align_up(t.num_bytes, alignment_);
  return n;
}

Status GgufWriter::write(const std::string& path, const ProgressFn& progress) const {
  const std::string partial = path + ".partial";
  OutFile out(partial);
  if (!out.ok()) return make_error(partial + ": cannot create file (" + std::strerror(out.error_code()) + ")");

  out.pod<uint32_t>(kGgufMagic);
  out.pod<uint32_t>(version_);
  out.pod<uint64_t>(tensors_.size());
  out.pod<uint64_t>(metadata_.size());
  for (const auto& [key, value] : metadata_) {
    out.string(key);
    out.pod<uint32_t>(static_cast<uint32_t>(value.type));
    write_value(out, value);
  }
  uint64_t offset = 0;  // relative to the data section
  for (const auto& t : tensors_) {
    out.string(t.name);
    out.pod<uint32_t>(static_cast<uint32_t>(t.dims.size()));
    for (uint64_t d : t.dims) out.pod<uint64_t>(d);
    out.pod<uint32_t>(t.ggml_type);
    out.pod<uint64_t>(offset);
    offset += align_up(t.num_bytes, alignment_);
  }
  out.zeros(align_up(out.position(), alignment_) - out.position());

  const uint64_t total = total_tensor_bytes();
  uint64_t done = 0;
  std::vector<std::byte> buffer;  // (num_bytes) of the tensor being written
  for (const auto& t : tensors_) {
    buffer.assign(static_cast<size_t>(t.num_bytes), std::byte{0});
    if (t.fill) t.fill(buffer);
    out.bytes(buffer.data(), buffer.size());
    out.zeros(align_up(t.num_bytes, alignment_) - t.num_bytes);
    done += align_up(t.num_bytes, alignment_);
    if (progress) progress(done, total);
    if (!out.ok()) break;
  }
  if (out.close() != 0) {
    std::remove(partial.c_str());
    return make_error(partial + ": write failed (" + std::strerror(out.error_code()) + ")");
  }
  if (std::rename(partial.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(partial.c_str());
    return make_error(path + ": cannot move the finished file into place (" + std::strerror(err) + ")");
  }
  return Status::success();
}

}  // namespace gb
