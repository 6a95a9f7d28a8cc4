#pragma once
// Mixed precision as a Graph -> Graph pass, in the spirit of torch.autocast: the matrix products run
// in a 16-bit compute dtype, the numerically sensitive ops in f32, and everything else follows its
// inputs. The result shows every cast it inserted, so the step graph says exactly what runs.
// docs/training.md ("2026-11-28: mixed precision") lists the ops of each class.
#include <string_view>

#include "tensorgrad/ir/graph.h"
#include "tensorgrad/ir/ops/op_id.h"

namespace tg {

// What autocast does with an op's float inputs.
enum class AutocastClass : std::uint8_t {
  // Cast to the compute dtype; the result is in it (matmul, conv2d).
  lower,
  // Cast to f32; the result is f32 (reductions, softmax, losses, exp/log/rsqrt).
  f32,
  // Run in the dtype the inputs share. Where computed (non-constant) inputs meet in different
  // dtypes, all are cast to f32, the widest. Constants (values computed from creation ops only,
  // like the full a scalar operand traces to) do not vote, as a Python scalar does not in PyTorch:
  // a 16-bit input with an f32 constant runs in f32 and its result is cast back to the 16-bit dtype
  // (PyTorch's opmath: one rounding of the f32 result).
  follow,
};
AutocastClass autocast_class(OpId op);
std::string_view autocast_class_name(AutocastClass cls);

// The graph with matmul/conv2d in `compute` (f16 or bf16) and the rest as AutocastClass says.
// Inputs (params included) keep their f32 dtype, and every output keeps its dtype (a cast back
// where needed), so a loss stays an f32 scalar and its gradients reach the f32 params through the
// casts' gradients. An explicit cast in `g` stays. compute == f32 returns `g` unchanged. Throws
// tg::Error for a compute dtype that is not a float.
Graph autocast(const Graph& g, DType compute);

}  // namespace tg
