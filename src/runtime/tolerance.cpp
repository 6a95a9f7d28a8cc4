#include "tensorgrad/runtime/tolerance.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tensorgrad/ir/ops/op_def.h"

namespace tg {

double graph_tolerance(const Graph& g) {
  constexpr double kF32Epsilon = std::numeric_limits<float>::epsilon();
  double ulps = 0;
  std::vector<TensorType> types;
  for (const Node& node : g.nodes()) {
    const OpDef& def = op_def(node.op);
    types.clear();
    for (ValueId v : node.inputs) types.push_back(g.type(v));
    std::int64_t n = 1;
    if (def.reduction_length) {
      n = def.reduction_length(node.attrs, types);
    } else if (!types.empty() && g.type(node.output).size() > 0) {
      n = std::max<std::int64_t>(1, types[0].size() / g.type(node.output).size());
    }
    ulps += tolerance_ulps(def.tolerance, n);
  }
  // Errors entering an op come out scaled by its derivative; the samples' domains keep those
  // derivatives small (denominators >= 0.5, bounded inputs to exp), and a factor of 4 covers them.
  return 4.0 * kF32Epsilon * std::max(ulps, 1.0);
}

double oracle_scale(const std::vector<HostTensor>& values) {
  double scale = 1.0;
  for (const HostTensor& t : values) {
    for (std::size_t i = 0; i < t.size(); ++i) {
      const double v = t.at(i);
      if (std::isfinite(v)) scale = std::max(scale, std::fabs(v));
    }
  }
  return scale;
}

}  // namespace tg
