// ForwardingBackend: a gb::Backend that hands every call to another backend,
// for tests that change one behaviour of a real backend (fail chosen calls,
// hide a capability) and keep the rest. Subclasses override what they change.
#pragma once

#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "backend/backend.h"

namespace gbtest {

class ForwardingBackend : public gb::Backend {
 public:
  explicit ForwardingBackend(std::unique_ptr<gb::Backend> inner) : inner_(std::move(inner)) {}

  gb::Status reserve_work(const gb::StepLimits& limits) override { return inner_->reserve_work(limits); }
  size_t work_bytes_reserved() const override { return inner_->work_bytes_reserved(); }
  gb::Status init_kv_pool(const gb::KvPoolSpec& spec) override { return inner_->init_kv_pool(spec); }
  size_t kv_pool_bytes() const override { return inner_->kv_pool_bytes(); }
  size_t kv_resident_bytes() const override { return inner_->kv_resident_bytes(); }
  std::vector<gb::WeightType> kv_types() const override { return inner_->kv_types(); }
  bool supports_window_group() const override { return inner_->supports_window_group(); }
  void release_block_memory(std::span<const int32_t> blocks, gb::KvGroup group) override {
    inner_->release_block_memory(blocks, group);
  }
  gb::Status forward(const gb::BatchLayout& batch, std::span<float> logits) override {
    return inner_->forward(batch, logits);
  }
  gb::Status forward_capture(const gb::BatchLayout& batch, std::span<float> logits, gb::CaptureRows& rows) override {
    return inner_->forward_capture(batch, logits, rows);
  }
  gb::Status epilogue_rows(std::span<const float> x, int32_t n, std::span<float> logits) override {
    return inner_->epilogue_rows(x, n, logits);
  }
  gb::Status copy_blocks(std::span<const std::pair<int32_t, int32_t>> src_dst, gb::KvGroup group) override {
    return inner_->copy_blocks(src_dst, group);
  }
  bool supports_kv_eviction() const override { return inner_->supports_kv_eviction(); }
  gb::Status move_slots(std::span<const std::pair<int32_t, int32_t>> src_dst) override {
    return inner_->move_slots(src_dst);
  }
  gb::Status read_kv_slot(int32_t layer, int32_t block, int32_t slot, std::span<float> k,
                          std::span<float> v) const override {
    return inner_->read_kv_slot(layer, block, slot, k, v);
  }
  gb::DeviceInfo device_info() const override { return inner_->device_info(); }

 protected:
  gb::Backend& inner() { return *inner_; }

 private:
  std::unique_ptr<gb::Backend> inner_;
};

}  // namespace gbtest
