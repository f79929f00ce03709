// KvArena: the host memory of a KV pool, reserved at once and committed as it
// is used. The pool's pages are anonymous zero pages mapped without a swap
// reservation (MAP_NORESERVE): the kernel gives a page real memory when a
// block's K or V is first written there, so the process's resident memory
// grows with the tokens the pool has held, not with its capacity (a pool sized
// for a 131072-token context costs nothing until it is used). Reads of a
// never-written slot see zeros, as with a zero-filled buffer.
//
// A reservation the system refuses (address-space limit, overcommit policy)
// is an error naming the bytes, never a crash.
//
// Thread: a plain owner; the engine thread.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/result.h"

namespace gb {

class KvArena {
 public:
  KvArena() = default;
  ~KvArena();
  KvArena(KvArena&& other) noexcept;
  KvArena& operator=(KvArena&& other) noexcept;
  KvArena(const KvArena&) = delete;
  KvArena& operator=(const KvArena&) = delete;

  // `what` names the memory in the error ("the KV pool").
  static Result<KvArena> reserve(size_t bytes, const char* what);

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Bytes of the arena in memory now (pages written at least once and not
  // handed back), counted with mincore.
  size_t resident_bytes() const;
  // Hands back the whole pages inside [offset, offset + bytes) (a page shared
  // with bytes outside the range keeps its contents): they read as zeros and
  // cost no memory until written again.
  void release(size_t offset, size_t bytes);

 private:
  void release();
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace gb
