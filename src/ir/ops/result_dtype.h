#pragma once
// A product-like op (matmul, conv2d) with its result in a chosen float dtype, as a composite the
// graph shows: operands narrower than the result are cast up first, so 16-bit operands with an f32
// result multiply exactly and accumulate in f32 with no rounding to 16 bits in between (a pattern a
// backend may run on its matrix units); a result narrower than the operands rounds the product
// once. Mixed operand dtypes are left to the op's own rule, which names them.
#include <string>
#include <string_view>

#include "rules.h"

namespace tg::frontend {

template <class Product>
Tensor product_in_dtype(std::string_view op, const Tensor& a, const Tensor& b, DType out, const CallSite& loc,
                        Product product) {
  if (!is_float(out)) {
    throw ShapeError(std::string(op), {a.type(), b.type()},
                     "the result dtype must be a float dtype (f32, f16, bf16), got " + std::string(dtype_name(out)),
                     site(loc));
  }
  if (a.dtype() != b.dtype() || out == a.dtype()) return product(a, b);
  if (dtype_bytes(out) > dtype_bytes(a.dtype())) return product(cast(a, out, loc), cast(b, out, loc));
  return cast(product(a, b), out, loc);
}

}  // namespace tg::frontend
