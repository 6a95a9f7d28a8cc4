#pragma once
// The message for a param value of the wrong type, shared by Session::set_param and
// Training::upload_params: both types, and a hint when the value looks transposed.
#include <string>

#include "tensorgrad/ir/shape.h"

namespace tg::detail {

// Whether `got` differs from `expected` only by its last two dims being swapped (a 2-D matrix
// transposed, or a batch of them).
bool looks_transposed(const Shape& expected, const Shape& got);

// "expected f32[128,64], got f32[64,128]: it looks transposed (...)" — the transposed hint names
// PyTorch's nn.Linear, whose weight is [out, in] where tensorgrad's Linear W is [in, out], the usual
// source of such a value.
std::string type_mismatch(const TensorType& expected, const TensorType& got);

}  // namespace tg::detail
