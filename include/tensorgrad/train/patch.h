#pragma once
// patch(name, t): the dual of capture(). It marks an intermediate of a traced loss or forward as a
// site whose value a run may replace; which sites are active and what they carry are per-run
// inputs (a tg::Patches passed to Training::step or Forward::run):
//
//   tg::Tensor h = tg::patch("h1", tg::relu(m.l1(x)));  // [B, 64]
//   ...
//   forward.run(batch, tg::Patches().zero("h1"));                       // zero ablation
//   forward.run(batch, tg::Patches().set("h1", mean_over_dataset));     // mean ablation
//   forward.run(batch_b, tg::Patches().set("h1", run_a.captures().tensor("h1")));  // transplant
//
// Inactive sites cost nothing: patch() returns t itself and adds no node. Each set of active sites
// is compiled into its own graph (cached next to the batch sizes), in which an active site's value
// is the graph input "patch.<name>" and the nodes only it needed are removed. So no gradient flows
// through an active site: the replacement is a data input (it gets no gradient), and params that
// reach the loss only through the site get a zero gradient. docs/training/compile.md, "Patches".
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tensorgrad/interp/host_tensor.h"
#include "tensorgrad/ir/graph.h"
#include "tensorgrad/ir/tensor.h"

namespace tg {

// The prefix of the graph inputs an active site reads its replacement from.
inline constexpr std::string_view kPatchPrefix = "patch.";

// Returns t, or, when the site `name` is active in the graph being compiled, the graph input
// "patch.<name>" of t's type. Outside Training/Forward compilation (a graph traced by hand with
// GraphBuilder) every site is inactive. Throws tg::Error for an empty name or an invalid tensor, and
// CompileError for a name used twice in one forward.
Tensor patch(std::string_view name, const Tensor& t);

// The active sites of one run and their values. A site not named here is inactive.
class Patches {
 public:
  // Zero ablation: the site's value is zeros of its type.
  Patches& zero(std::string_view site);
  // Mean ablation or transplant: the site's value is `value`, which must have the site's type
  // (dtype and shape; a capture of the same site on another input has it). Any storage width.
  Patches& set(std::string_view site, HostTensor value);

  bool empty() const { return values_.empty(); }
  // The active site names, sorted.
  std::set<std::string> sites() const;
  // The value given for `site` (nullopt: zeros). Throws tg::Error for a site not set.
  const std::optional<HostTensor>& value(std::string_view site) const;

 private:
  std::map<std::string, std::optional<HostTensor>, std::less<>> values_;
};

namespace detail {

// The sites a trace met, by name, with their types.
using PatchSites = std::map<std::string, TensorType, std::less<>>;

// While it lives, patch() calls on `builder` (this thread) record their sites and replace those in
// `active` by graph inputs. Not nestable on the same builder.
class PatchTraceScope {
 public:
  PatchTraceScope(GraphBuilder& builder, const std::set<std::string>& active);
  ~PatchTraceScope();
  PatchTraceScope(const PatchTraceScope&) = delete;
  PatchTraceScope& operator=(const PatchTraceScope&) = delete;
  const PatchSites& sites() const { return sites_; }

 private:
  friend Tensor tg::patch(std::string_view name, const Tensor& t);
  GraphBuilder* builder_;
  const std::set<std::string>* active_;
  PatchSites sites_;
  PatchTraceScope* previous_;
};

// `graph` without the nodes that no output needs (inputs all kept, in order; nodes in order). An
// active site leaves the nodes that computed its original value dead; this drops them so they
// neither run nor hold memory.
Graph without_dead_nodes(const Graph& graph);

// A message naming every site of `patches` that is not among `sites`, or nothing.
std::optional<std::string> unknown_sites(const PatchSites& sites, const Patches& patches);

// Checks `patches` against the compiled sites and returns the feed ("patch.<name>" -> value, zeros
// filled in), or a message naming every unknown site and every value of the wrong type.
std::variant<TensorMap, std::string> patch_feed(const PatchSites& sites, const Patches& patches);

}  // namespace detail
}  // namespace tg
