#include "kv/free_block_queue.h"

#include "core/check.h"

namespace gb {

void FreeBlockQueue::push_front(int32_t index) {
  KvBlock& b = (*blocks_)[static_cast<size_t>(index)];
  GB_CHECK(!b.in_queue);
  b.prev = -1;
  b.next = head_;
  if (head_ >= 0) (*blocks_)[static_cast<size_t>(head_)].prev = index;
  head_ = index;
  if (tail_ < 0) tail_ = index;
  b.in_queue = true;
  ++size_;
}

void FreeBlockQueue::push_back(int32_t index) {
  KvBlock& b = (*blocks_)[static_cast<size_t>(index)];
  GB_CHECK(!b.in_queue);
  b.next = -1;
  b.prev = tail_;
  if (tail_ >= 0) (*blocks_)[static_cast<size_t>(tail_)].next = index;
  tail_ = index;
  if (head_ < 0) head_ = index;
  b.in_queue = true;
  ++size_;
}

void FreeBlockQueue::remove(int32_t index) {
  KvBlock& b = (*blocks_)[static_cast<size_t>(index)];
  GB_CHECK(b.in_queue);
  if (b.prev >= 0) (*blocks_)[static_cast<size_t>(b.prev)].next = b.next;
  else head_ = b.next;
  if (b.next >= 0) (*blocks_)[static_cast<size_t>(b.next)].prev = b.prev;
  else tail_ = b.prev;
  b.prev = b.next = -1;
  b.in_queue = false;
  --size_;
}

int32_t FreeBlockQueue::pop_front() {
  GB_CHECK(head_ >= 0);
  const int32_t index = head_;
  remove(index);
  return index;
}

std::vector<int32_t> FreeBlockQueue::to_vector() const {
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(size_));
  for (int32_t i = head_; i >= 0; i = (*blocks_)[static_cast<size_t>(i)].next) out.push_back(i);
  return out;
}

std::string FreeBlockQueue::check_links() const {
  const auto n = static_cast<int32_t>(blocks_->size());
  int32_t count = 0;
  int32_t prev = -1;
  for (int32_t i = head_; i >= 0; i = (*blocks_)[static_cast<size_t>(i)].next) {
    if (i >= n) return "free queue: link to block " + std::to_string(i) + " out of range";
    const KvBlock& b = (*blocks_)[static_cast<size_t>(i)];
    if (!b.in_queue) return "free queue: block " + std::to_string(i) + " linked but not flagged in_queue";
    if (b.prev != prev) return "free queue: block " + std::to_string(i) + " has a wrong prev link";
    prev = i;
    if (++count > size_) return "free queue: longer than its size (cycle?)";
  }
  if (prev != tail_) return "free queue: tail does not match the last linked block";
  if (count != size_) return "free queue: size " + std::to_string(size_) + " but " + std::to_string(count) + " linked";
  int32_t flagged = 0;
  for (const KvBlock& b : *blocks_) flagged += b.in_queue ? 1 : 0;
  if (flagged != size_) return "free queue: " + std::to_string(flagged) + " blocks flagged in_queue, size " + std::to_string(size_);
  return {};
}

}  // namespace gb
