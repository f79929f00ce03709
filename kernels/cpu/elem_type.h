// The float weight types the float32-activation matmul reads (F32, F16, BF16).
// An alias of WeightType: the one weight-type table is kernels/cpu/weight_type.h.
#pragma once

#include "cpu/weight_type.h"

namespace gb::kernels {

using ElemType = WeightType;

}  // namespace gb::kernels
