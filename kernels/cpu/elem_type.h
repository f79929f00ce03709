// Storage types the CPU kernels read weights in. Mirrors gb::DType (engine/model/
// dtype.h) without depending on the engine; the CPU backend maps one to the other.
#pragma once

namespace gb::kernels {

enum class ElemType { F32, F16, BF16 };

}  // namespace gb::kernels
