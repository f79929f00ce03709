// Strong id types shared across the engine. A BlockId is an index into the KV
// block pool, a RequestId names one request for its whole life, a TokenId is a
// vocabulary index. Plain integers in flat arrays cross the backend seam.
#pragma once

#include <cstdint>
#include <functional>

namespace gb {

template <class Tag, class Rep>
struct StrongId {
  Rep value{};
  constexpr StrongId() = default;
  constexpr explicit StrongId(Rep v) : value(v) {}
  friend constexpr bool operator==(StrongId a, StrongId b) { return a.value == b.value; }
  friend constexpr auto operator<=>(StrongId a, StrongId b) { return a.value <=> b.value; }
};

using BlockId = StrongId<struct BlockIdTag, int32_t>;
using RequestId = StrongId<struct RequestIdTag, uint64_t>;
using TokenId = int32_t;  // vocabulary index; kept plain because it fills large arrays

}  // namespace gb

template <class Tag, class Rep>
struct std::hash<gb::StrongId<Tag, Rep>> {
  size_t operator()(gb::StrongId<Tag, Rep> id) const noexcept { return std::hash<Rep>{}(id.value); }
};
