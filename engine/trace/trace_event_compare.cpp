// trace_events_equal: exact field-by-field comparison of two events, generated
// from the field lists (trace_fields.h). Reals are compared by their bits so a
// round trip that changed the last bit of a float (or turned -0 into 0) is
// caught, and NaN equals itself.
#include <bit>

#include "trace/trace_fields.h"
#include "trace/trace_json.h"

namespace gb {
namespace {


template <class T>
bool same_fields(const T& a, const T& b);

template <class M>
bool same(const M& a, const M& b) {
  if constexpr (std::is_same_v<M, float>) {
    return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
  } else if constexpr (std::is_same_v<M, double>) {
    return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);
  } else if constexpr (is_vector<M>) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!same(a[i], b[i])) return false;
    return true;
  } else if constexpr (trace_fields::HasFields<M>) {
    return same_fields(a, b);
  } else if constexpr (is_optional<M>) {
    if (a.has_value() != b.has_value()) return false;
    return !a.has_value() || same(*a, *b);
  } else {
    return a == b;  // integers, bool, strings, ids, enums, optional ids
  }
}

template <class T>
bool same_fields(const T& a, const T& b) {
  bool equal = true;
  trace_fields::for_each_field<T>([&](const auto& entry) {
    equal = equal && same(a.*entry.ptr, b.*entry.ptr);
  });
  return equal;
}

}  // namespace

bool trace_events_equal(const TraceEvent& a, const TraceEvent& b) {
  if (a.seq != b.seq || a.t_us != b.t_us || a.body.index() != b.body.index()) return false;
  return std::visit(
      [&b](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        return same(x, std::get<T>(b.body));
      },
      a.body);
}

}  // namespace gb
