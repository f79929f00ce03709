// FreeBlockQueue: the blocks nobody holds, as an intrusive doubly linked list
// threaded through KvBlock::prev/next, so removing any block (a prefix hit reviving
// a cached block) is O(1) and needs no allocation.
//
// Order, front to back:
//   | free blocks (no hash), most recently freed first | cached blocks, least recently freed first |
// Allocation pops the front: a never-cached block when there is one, otherwise the
// least recently freed cached block (LRU eviction). push_front is for free blocks,
// push_back for cached ones; BlockPool keeps that split (check_invariants verifies it).
//
// Thread: engine thread only (owned by BlockPool).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kv/kv_block.h"

namespace gb {

class FreeBlockQueue {
 public:
  // `blocks` is the pool's block array; it must outlive the queue and not move.
  explicit FreeBlockQueue(std::vector<KvBlock>* blocks) : blocks_(blocks) {}

  int32_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int32_t front() const { return head_; }  // -1 when empty
  int32_t back() const { return tail_; }

  void push_front(int32_t index);
  void push_back(int32_t index);
  void remove(int32_t index);
  int32_t pop_front();

  // Indices front to back (O(n); tests and snapshots).
  std::vector<int32_t> to_vector() const;
  // Empty string when prev/next links, size and in_queue flags agree.
  std::string check_links() const;

 private:
  std::vector<KvBlock>* blocks_;
  int32_t head_ = -1;
  int32_t tail_ = -1;
  int32_t size_ = 0;
};

}  // namespace gb
