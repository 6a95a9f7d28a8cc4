// Training with patch() sites: one step graph per set of active sites, and the move of the params
// and state between them (training_impl.h, TrainingCore::use_patches).
#include "training_impl.h"

namespace tg::detail {

void TrainingCore::use_patches(const std::set<std::string>& active) {
  if (active == compiled.patches) return;
  CompiledStep next;
  if (auto it = patch_variants.find(active); it != patch_variants.end()) {
    next = std::move(it->second);
    patch_variants.erase(it);
  } else {
    next = compile_step(spec, active);
  }
  // The variants share the model and the optimizer, so their params and state inputs are the same
  // names and types; only their graphs differ. A throw here drops `next` and leaves `compiled` whole.
  Session& from = *compiled.session;
  Session& to = *next.session;
  for (const std::string& name : compiled.param_names) to.set_param(name, from.param(name));
  for (const std::string& name : compiled.state_inputs) to.set_param(name, from.param(name));
  for (const auto& [param, input] : compiled.grad_inputs) {
    if (to.graph().find_input(input)) to.set_param(input, from.param(input));
  }
  std::set<std::string> previous = compiled.patches;
  patch_variants.insert_or_assign(std::move(previous), std::move(compiled));
  compiled = std::move(next);
}

}  // namespace tg::detail
