#pragma once
// The state behind tg::Training and tg::Forward (include/tensorgrad/train/training.h), shared by
// the src/train/training*.cpp files.
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "bucketed_reduction.h"
#include "tensorgrad/train/patch.h"
#include "tensorgrad/train/training.h"

namespace tg::detail {

// What compiling a training spec produces; replace_model builds a new one and swaps it in.
struct CompiledStep {
  std::vector<ParamInfo> params;
  std::vector<std::string> param_names;
  std::vector<std::string> state_inputs;  // the optimizer's, zero at step 0
  // Per param with a gradient: the state input "<param>.last_grad" that output "grad.<param>"
  // writes back into after every completed step, so the gradients stay with the backend (a W2 step
  // on an H200 spent ~2.5 ms reading them back) and a failed step leaves the last ones in place.
  std::vector<std::pair<std::string, std::string>> grad_inputs;  // (param, input)
  std::unique_ptr<Session> session;                              // holds the graph, params and state
  // Data parallel (TrainingSpec::communicator): `session` runs only the update, from the gradients
  // all ranks reduced, and this one the forwards and backwards, with copies of the params and state
  // it reads (data_parallel.cpp). Null without a communicator.
  std::unique_ptr<Session> grad_session;
  // (params_version, local_changes) when the grad session last copied them.
  std::optional<std::pair<std::uint64_t, std::uint64_t>> grad_synced;
  // The sums the ranks reduce (loss, gradients, flag), one buffer reused by every step, and where
  // each output and bucket lies in it (made at the first data-parallel step).
  std::vector<float> reduce_buffer;
  std::optional<ReduceLayout> reduce_layout;
  // Per reduced output: the update session's staging memory for its sums (Session::input_staging;
  // empty on the interpreters and for empty outputs).
  std::map<std::string, std::span<std::byte>, std::less<>> reduce_staging;
  bool uses_step_seed = false;
  // Dynamic loss scaling (PrecisionPolicy): its config when on. Its state inputs are among
  // state_inputs; reinit sets the scale to init_scale rather than 0.
  std::optional<LossScaling> loss_scaling;
  PatchSites patch_sites;         // every patch() site of the loss, with its type
  std::set<std::string> patches;  // the sites active in this graph (patch.h)
};

struct TrainingCore {
  // Serialises the calls of the Training and of every Forward attached to it: they share params,
  // counters and the device (docs/training.md, "Threads"). Recursive because public calls call each
  // other (save downloads params and state, Forward::upload_params is Training::upload_params).
  mutable std::recursive_mutex mutex;
  ErasedTrainingSpec spec;  // model, loss, inputs, optimizer, backend, device
  Schedule base_lr;         // the schedule as the user gave it (reset and replace_model restart it)
  Schedule lr;              // base_lr rebased by set_lr
  std::uint64_t seed = 0;
  // The step graph of the active patch sites last stepped with; it holds the params and state.
  CompiledStep compiled;
  // The step graphs of other sets of active sites, compiled on first use. Their sessions' params and
  // state are stale: switching moves them over (move_state) and swaps the graph into `compiled`.
  std::map<std::set<std::string>, CompiledStep> patch_variants;
  std::int64_t steps = 0;
  bool last_step_skipped = false;  // loss scaling skipped the last completed step's update
  bool has_grads = false;          // a step completed since compile, reset or load: grad_inputs hold its gradients
  // Bumped whenever params change (steps, uploads, resets, loads), so forwards know to copy them.
  std::uint64_t params_version = 0;
  // Bumped by every call that sets params or optimizer state other than a step (reinit, uploads,
  // loads): data parallel then starts its next step by sending rank 0's to every rank.
  std::uint64_t local_changes = 0;
  std::uint64_t broadcast_changes = ~std::uint64_t{0};  // local_changes at the last broadcast
  std::int64_t steps_since_params_check = 0;
  // Bumped by replace_model: forwards drop their compiled graphs.
  std::uint64_t generation = 0;
  // The params downloaded at params_version == snapshot_version, shared by every forward's sync.
  std::optional<TensorMap> snapshot;
  std::uint64_t snapshot_version = 0;

  // Sets params to init_value(seed) and/or zeroes the optimizer state (and the step counter).
  void reinit(bool params, bool optimizer);
  // Makes `compiled` the step graph with these active patch sites (compiling it on first use) and
  // moves the params, optimizer state and last gradients into it. Throws; then nothing changed.
  void use_patches(const std::set<std::string>& active);
  const TensorMap& param_snapshot();
};

// A Forward's calls hold training->mutex, which guards this state too.
struct ForwardCore {
  std::shared_ptr<TrainingCore> training;
  ErasedFn fn;
  std::type_index model_type = typeid(void);
  InputSpecs inputs;
  std::size_t max_cached = 8;

  struct Entry {
    std::int64_t batch = -1;  // the resolved wildcard, -1 without one
    std::unique_ptr<Session> session;
    std::uint64_t synced_version = 0;
    bool synced = false;
    bool uses_step_seed = false;
    std::set<std::string> patches;  // the active patch sites compiled in
    PatchSites patch_sites;
  };
  std::list<Entry> cache;  // most recently used first
  std::uint64_t generation = 0;
  std::int64_t runs = 0;

  // The entry for `batch` and these active patch sites (compiling it on a miss, evicting the least
  // recently used). Throws.
  Entry& entry_for(std::int64_t batch, const std::set<std::string>& patches = {});
};

// Checks `data` against the declared inputs (all of them, nothing else, each of its type). Returns
// a message naming every problem (the input, what was expected, what came), or nothing.
std::optional<std::string> check_data(const InputSpecs& specs, const TensorMap& data);

// Traces fn(model, inputs) with the model's params bound (one param input per param, then one
// data input per spec) and lets add_outputs name the outputs. The patch sites in `patches` become
// inputs (and the nodes they leave dead are dropped); `sites`, when given, receives every site met.
// Throws what tracing throws.
Graph trace(const Module& model, const ErasedFn& fn, const InputSpecs& inputs, const std::string& graph_name,
            const std::function<void(GraphBuilder&, const Tensor&)>& add_outputs,
            const std::set<std::string>& patches = {}, PatchSites* sites = nullptr);

CompiledStep compile_step(const ErasedTrainingSpec& spec, const std::set<std::string>& patches = {});

// Gradient accumulation (micro_batches.cpp). The inputs of one micro-batch: every input's dim 0
// divided by micro_batches (throws CompileError naming an input it does not divide, or a 0-d one).
InputSpecs micro_batch_inputs(const InputSpecs& inputs, int micro_batches);
// The step-seed input of micro-batch `micro_batch` >= 1 (micro-batch 0 reads kStepSeedInput).
std::string micro_seed_input(int micro_batch);
// The graph of `micro_batches` micro-batches from `micro`, the differentiated graph of one: the
// declared data inputs at full size (`inputs`), each micro-batch reading its rows of them in turn;
// params and state shared. Outputs: "loss" and every "grad.<param>" the mean over the micro-batches
// (summed in micro-batch order, then divided by their count), the loss scaler's finite flag the
// minimum, captures micro-batch 1's. Throws CompileError when `micro` reads a patch site.
Graph accumulate_micro_batches(const Graph& micro, const InputSpecs& inputs, int micro_batches);
std::uint64_t random_seed();

// Data parallel (data_parallel.cpp). The graph the update session starts from: the params and state
// inputs of `with_grads`, and for each of its outputs but captures an input
// "optim.reduced.<output>" holding the sum over `ranks` ranks, from which "loss" and "grad.<param>"
// are that sum / ranks and the loss scaler's finite flag is 1 where the sum is `ranks` (all finite).
Graph reduced_update_graph(const Graph& with_grads, int ranks);
// Refuses specs data parallel cannot run (CompileError), and agrees on rank 0's seed.
void prepare_data_parallel(ErasedTrainingSpec& spec);
// The step of a training with a communicator: every rank's forward and backward, the reduction,
// the same update everywhere. `early` is this rank's failure before running anything (bad data, a
// schedule without a rate, ...): every rank then fails the step alike. `grad_feed` is the data (and
// patches and seeds); `update_feed` the optimizer's per-step inputs. Never throws.
RunResult data_parallel_step(TrainingCore& core, std::optional<RunFailure> early, TensorMap grad_feed,
                             TensorMap update_feed, std::int64_t number);
// After a completed step, every params_check_interval steps: whether the ranks hold the same params
// and state (a "diverged" failure naming each rank's checksum when not). Collective.
std::optional<RunFailure> check_ranks_agree(TrainingCore& core);
// The step_seed input of stochastic ops for run `index` of a graph under `seed`.
HostTensor step_seed_value(std::uint64_t seed, std::int64_t index);
RunFailure failure(std::string kind, std::string message);

}  // namespace tg::detail
