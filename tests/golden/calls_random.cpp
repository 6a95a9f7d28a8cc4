// Explicit golden calls of the random family (cases in tools/goldens/random.py, which draws the same Philox
// stream in pure Python). A case names its seed input `step_seed`, so tg::randn and tg::dropout pick
// it up as the graph's step seed exactly as in a user's graph; attribute `salt` (default 0) says how
// many stochastic calls came before this one in the graph, i.e. the salt next_salt() hands it.
#include "golden_calls.h"
#include "tensorgrad/ir/ops/ids/random.h"

namespace tg::golden {

namespace {

// Checks that the case's seed input is the step seed the front-end will use, and consumes the salts
// of `salt` earlier stochastic calls.
void prepare_stream(const Tensor& seed, const Attrs& attrs, std::string_view call) {
  GraphBuilder& builder = seed.builder();
  if (builder.graph().find_input(kStepSeedInput) != seed.id()) {
    throw Error("golden call '" + std::string(call) + "' needs its seed input named " + kStepSeedInput);
  }
  const std::int64_t salt = optional_integer(attrs, "salt").value_or(0);
  for (std::int64_t k = 0; k < salt; ++k) builder.next_salt();
}

// The salt of the node just traced must be the one the case's PyTorch side used.
Tensor check_salt(const Tensor& y, const Attrs& attrs, std::string_view call) {
  const std::int64_t salt = optional_integer(attrs, "salt").value_or(0);
  const Graph& g = y.builder().graph();
  if (!g.nodes().empty() && g.nodes().back().output == y.id() && g.nodes().back().attrs.integer("salt") != salt) {
    throw Error("golden call '" + std::string(call) + "' traced salt " +
                std::to_string(g.nodes().back().attrs.integer("salt")) + ", the case expects " + std::to_string(salt));
  }
  return y;
}

void add_calls(CallEntries& t) {
  t["randn"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 1, "randn");
    prepare_stream(in[0], a, "randn");
    return check_salt(randn(a.ints("shape")), a, "randn");
  };
  t["dropout"] = [](const std::vector<Tensor>& in, const Attrs& a) {
    require_inputs(in, 2, "dropout");  // x, step_seed
    prepare_stream(in[1], a, "dropout");
    return check_salt(dropout(in[0], number(a, "p")), a, "dropout");
  };
}

const CallRegistration kCalls("random", add_calls);

}  // namespace

}  // namespace tg::golden
