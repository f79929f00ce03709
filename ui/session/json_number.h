// Whole numbers read from JSON that came from outside (session files, traces,
// sampler settings the user typed): QJsonValue holds every number as a double,
// and converting a double outside the target type's range is undefined
// behaviour, so every such read goes through here.
// Threads: any.
#pragma once

#include <QJsonValue>
#include <cmath>
#include <optional>

namespace gbui {

// `v` as an integer when it is a number with no fractional part in [lo, hi]
// (hi at most 2^53, the largest a double holds exactly); nullopt otherwise.
inline std::optional<qint64> jsonWholeNumber(const QJsonValue& v, qint64 lo, qint64 hi) {
  if (!v.isDouble()) return std::nullopt;
  const double d = v.toDouble();
  if (!(d >= static_cast<double>(lo) && d <= static_cast<double>(hi)) || d != std::floor(d)) return std::nullopt;
  return static_cast<qint64>(d);
}

inline constexpr qint64 kJsonMaxExactInteger = qint64{1} << 53;

}  // namespace gbui
