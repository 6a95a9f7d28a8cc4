// patch(), Patches, and the helpers that compile a set of active sites (include/tensorgrad/train/patch.h).
#include "tensorgrad/train/patch.h"

#include "tensorgrad/ir/error.h"

namespace tg {

namespace {
// The innermost PatchTraceScope of this thread (compile and attach trace on the caller's thread).
thread_local detail::PatchTraceScope* current_scope = nullptr;

std::string list(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) out += (out.empty() ? "" : ", ") + name;
  return out.empty() ? "(none)" : out;
}
}  // namespace

Tensor patch(std::string_view name, const Tensor& t) {
  if (name.empty()) throw Error("patch: the site name must not be empty");
  if (!t.valid()) throw Error("patch '" + std::string(name) + "': the tensor is not a traced value");
  detail::PatchTraceScope* scope = current_scope;
  // A graph traced by hand (no Training/Forward compiling it): every site is inactive.
  if (scope == nullptr || scope->builder_ != &t.builder()) return t;
  GraphBuilder& builder = t.builder();
  if (!scope->sites_.emplace(std::string(name), t.type()).second) {
    throw CompileError("patch site '" + std::string(name) + "' appears twice in graph '" + builder.graph().name() +
                       "': patch site names must be unique within one forward");
  }
  if (!scope->active_->contains(std::string(name))) return t;  // inactive: no node, no input
  const std::string input = std::string(kPatchPrefix) + std::string(name);
  if (builder.graph().find_input(input)) {
    throw CompileError("patch site '" + std::string(name) + "': graph '" + builder.graph().name() +
                       "' already has an input named '" + input + "'");
  }
  return builder.input(input, t.type());
}

Patches& Patches::zero(std::string_view site) {
  if (site.empty()) throw Error("Patches::zero: the site name must not be empty");
  values_.insert_or_assign(std::string(site), std::nullopt);
  return *this;
}

Patches& Patches::set(std::string_view site, HostTensor value) {
  if (site.empty()) throw Error("Patches::set: the site name must not be empty");
  values_.insert_or_assign(std::string(site), std::optional<HostTensor>(std::move(value)));
  return *this;
}

std::set<std::string> Patches::sites() const {
  std::set<std::string> out;
  for (const auto& entry : values_) out.insert(entry.first);
  return out;
}

const std::optional<HostTensor>& Patches::value(std::string_view site) const {
  const auto it = values_.find(site);
  if (it == values_.end()) throw Error("Patches: site '" + std::string(site) + "' is not set");
  return it->second;
}

namespace detail {

PatchTraceScope::PatchTraceScope(GraphBuilder& builder, const std::set<std::string>& active)
    : builder_(&builder), active_(&active), previous_(current_scope) {
  current_scope = this;
}

PatchTraceScope::~PatchTraceScope() { current_scope = previous_; }

Graph without_dead_nodes(const Graph& graph) {
  std::vector<bool> needed(graph.values().size(), false);
  for (const GraphOutput& out : graph.outputs()) needed[static_cast<std::size_t>(out.value)] = true;
  // Nodes are in SSA order (producers first), so one backward sweep marks everything needed.
  for (auto node = graph.nodes().rbegin(); node != graph.nodes().rend(); ++node) {
    if (!needed[static_cast<std::size_t>(node->output)]) continue;
    for (const ValueId in : node->inputs) needed[static_cast<std::size_t>(in)] = true;
  }
  Graph out(graph.name());
  std::vector<ValueId> remap(graph.values().size(), -1);
  // Inputs keep their order and values first, as the builder made them; nodes follow in order. An
  // input added mid-trace (an active site) therefore moves before the nodes, which is still SSA.
  for (const GraphInput& in : graph.inputs()) {
    remap[static_cast<std::size_t>(in.value)] = out.add_input(in.name, in.kind, graph.type(in.value));
  }
  for (const Node& node : graph.nodes()) {
    if (!needed[static_cast<std::size_t>(node.output)]) continue;
    std::vector<ValueId> inputs;
    inputs.reserve(node.inputs.size());
    for (const ValueId in : node.inputs) inputs.push_back(remap[static_cast<std::size_t>(in)]);
    remap[static_cast<std::size_t>(node.output)] =
        out.add_node(node.op, std::move(inputs), node.attrs, graph.type(node.output), node.loc);
  }
  for (const GraphOutput& o : graph.outputs()) out.add_output(o.name, remap[static_cast<std::size_t>(o.value)]);
  return out;
}

std::optional<std::string> unknown_sites(const PatchSites& sites, const Patches& patches) {
  std::string problems;
  for (const std::string& site : patches.sites()) {
    if (sites.contains(site)) continue;
    std::vector<std::string> known;
    for (const auto& entry : sites) known.push_back(entry.first);
    problems += (problems.empty() ? "" : "; ") + std::string("unknown patch site '") + site +
                "' (the graph's sites are " + list(known) + ")";
  }
  if (problems.empty()) return std::nullopt;
  return problems;
}

std::variant<TensorMap, std::string> patch_feed(const PatchSites& sites, const Patches& patches) {
  std::string problems = unknown_sites(sites, patches).value_or("");
  const auto add = [&](const std::string& problem) { problems += (problems.empty() ? "" : "; ") + problem; };
  TensorMap feed;
  for (const std::string& site : patches.sites()) {
    const auto it = sites.find(site);
    if (it == sites.end()) continue;  // named above
    const std::optional<HostTensor>& value = patches.value(site);
    if (!value) {
      feed.emplace(std::string(kPatchPrefix) + site, HostTensor::filled(it->second, 0.0));
    } else if (!(value->type == it->second)) {
      add("patch site '" + site + "' is " + it->second.to_string() + ", got a value of type " +
          value->type.to_string());
    } else {
      feed.emplace(std::string(kPatchPrefix) + site, *value);
    }
  }
  if (!problems.empty()) return problems;
  return feed;
}

}  // namespace detail
}  // namespace tg
