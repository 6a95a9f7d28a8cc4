// tg_loss_curve: tensorgrad's side of bench/loss_curve.py. Trains examples/models.h's CharTransformer
// (W2, W2_small or W6) compiled exactly as tg_train_bench compiles it (bench::compile_transformer:
// AdamW lr 1e-3, weight decay 0.01, tensorgrad's decay flags) with TrainingSpec::precision compute
// --precision, from the init in D/init.safetensors (Training::upload_params, shapes checked) on the
// batches in D/batches.safetensors (step k gets tokens[k - 1] and targets[k - 1]), and writes
// D/tg_<precision>.json: each step's loss, wall time (ms, the loss read back included: Training::step
// is synchronous) and, for f16, whether loss scaling skipped it and the scale after it.
//
//   tg_loss_curve --dir D --workload W2 --precision bf16 --backend vulkan --steps 100 [--w6-batch 8]
//
// Exit 0 when every step ran, 1 on a failed step or bad files (the message names the file, tensor
// and what was expected), 2 on bad arguments.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "examples/command_line.h"
#include "tensorgrad/tensorgrad.h"
#include "tensorgrad/train/safetensors.h"
#include "tensorgrad/vk/context.h"
#include "transformer_setup.h"

namespace {

using namespace tg;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string dir;
  std::string workload = "W2_small";
  std::string precision = "f32";
  std::string backend = "interp_f32";
  std::int64_t steps = 100;
  std::int64_t w6_batch = 8;
};

struct Workload {
  examples::TransformerConfig config;
  std::int64_t batch;
};

// The sizes of bench/train_bench.cpp (and bench/pytorch_train.py's W2_FULL, goldens_train's W2_SMALL).
Workload workload_of(const Options& o) {
  if (o.workload == "W2") return {{.vocab = 65, .context = 128, .width = 128, .layers = 4, .heads = 4}, 32};
  if (o.workload == "W2_small") return {{.vocab = 65, .context = 16, .width = 32, .layers = 2, .heads = 4}, 4};
  return {examples::kW6Config, o.w6_batch};
}

std::string shape_text(const Shape& shape) {
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

SafetensorsFile load_required(const fs::path& path) {
  if (!fs::exists(path))
    throw SafetensorsError(path.string() + " is missing (write it first: bench/loss_curve.py --dir " +
                           path.parent_path().string() + " ...)");
  return load_safetensors(path.string());
}

// The init of every param, checked against the compiled training's params (names, shapes, F32).
TensorMap load_init(const fs::path& path, const Training& training, const std::string& workload) {
  SafetensorsFile file = load_required(path);
  if (const auto it = file.metadata.find("workload"); it != file.metadata.end() && it->second != workload)
    throw SafetensorsError(path.string() + " holds the init of " + it->second + ", not of " + workload);
  std::set<std::string> unused;
  for (const auto& [name, _] : file.tensors) unused.insert(name);
  for (const ParamInfo& p : training.params()) {
    const auto it = file.tensors.find(p.name);
    if (it == file.tensors.end()) throw SafetensorsError(path.string() + ": no tensor for param " + p.name);
    if (it->second.type.shape != p.shape)
      throw SafetensorsError(path.string() + ": param " + p.name + " is " + shape_text(it->second.type.shape) +
                             ", the " + workload + " model's is " + shape_text(p.shape));
    if (file.stored_dtypes.at(p.name) != "F32")
      throw SafetensorsError(path.string() + ": param " + p.name + " is stored as " + file.stored_dtypes.at(p.name) +
                             ", expected F32");
    unused.erase(p.name);
  }
  if (!unused.empty())
    throw SafetensorsError(path.string() + ": tensor " + *unused.begin() + " is no param of " + workload);
  return std::move(file.tensors);
}

// tokens and targets, I32 [at least `steps`, B, T].
TensorMap load_batches(const fs::path& path, std::int64_t steps, std::int64_t batch, std::int64_t context) {
  SafetensorsFile file = load_required(path);
  TensorMap out;
  for (const char* name : {"tokens", "targets"}) {
    const auto it = file.tensors.find(name);
    if (it == file.tensors.end()) throw SafetensorsError(path.string() + ": no tensor '" + name + "'");
    const Shape& shape = it->second.type.shape;
    if (file.stored_dtypes.at(name) != "I32")
      throw SafetensorsError(path.string() + ": " + name + " is stored as " + file.stored_dtypes.at(name) +
                             ", expected I32");
    if (shape.size() != 3 || shape[1] != batch || shape[2] != context)
      throw SafetensorsError(path.string() + ": " + name + " is " + shape_text(shape) + ", expected [steps, " +
                             std::to_string(batch) + ", " + std::to_string(context) + "]");
    if (shape[0] < steps)
      throw SafetensorsError(path.string() + ": " + name + " holds " + std::to_string(shape[0]) + " steps, " +
                             std::to_string(steps) + " asked for");
    out.emplace(name, it->second);
  }
  return out;
}

// Step `step`'s (0-based) slice of each [steps, B, T] tensor.
TensorMap batch_at(const TensorMap& all, std::int64_t step) {
  TensorMap out;
  for (const auto& [name, tensor] : all) {
    const Shape& s = tensor.type.shape;
    const std::size_t count = static_cast<std::size_t>(s[1] * s[2]);
    const std::span<const std::int32_t> rows = tensor.i32_data().subspan(static_cast<std::size_t>(step) * count, count);
    out.emplace(name, HostTensor::i32({s[1], s[2]}, std::vector<std::int32_t>(rows.begin(), rows.end())));
  }
  return out;
}

int run(const Options& o) {
  const Workload w = workload_of(o);
  const DType compute = o.precision == "f32" ? DType::f32 : o.precision == "bf16" ? DType::bf16 : DType::f16;
  const Backend backend = o.backend == "vulkan"       ? Backend::vulkan
                          : o.backend == "interp_f64" ? Backend::interp_f64
                                                      : Backend::interp_f32;
  const fs::path dir(o.dir);
  std::shared_ptr<vk::Context> ctx;
  if (backend == Backend::vulkan) ctx = vk::Context::create();
  const examples::CharTransformer model(w.config);
  const auto compile_began = Clock::now();
  Training training = bench::compile_transformer(model, w.batch, backend, ctx, 2, PrecisionPolicy{.compute = compute});
  const double compile_s = std::chrono::duration<double>(Clock::now() - compile_began).count();
  training.upload_params(load_init(dir / "init.safetensors", training, o.workload));
  const TensorMap batches = load_batches(dir / "batches.safetensors", o.steps, w.batch, w.config.context);

  std::vector<double> losses, step_ms, scales;
  std::vector<std::int64_t> skipped;
  for (std::int64_t step = 0; step < o.steps; ++step) {
    const TensorMap batch = batch_at(batches, step);
    const auto began = Clock::now();
    const StepResult r = training.step(batch);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - began).count();
    if (!r.ok()) {
      std::cerr << "tg_loss_curve: step " << step + 1 << " failed: " << r.failure().kind << ": " << r.failure().message
                << "\n";
      return 1;
    }
    losses.push_back(r.loss());
    step_ms.push_back(ms);
    if (compute == DType::f16) {
      scales.push_back(training.loss_scale());
      if (training.last_step_skipped()) skipped.push_back(step + 1);
    }
    if (step == 0 || (step + 1) % 10 == 0)
      std::fprintf(stderr, "tg %s step %lld: loss %.6f (%.1f ms)\n", o.precision.c_str(),
                   static_cast<long long>(step + 1), r.loss(), ms);
  }
  nlohmann::json doc = {{"side", "tg"},
                        {"precision", o.precision},
                        {"workload", o.workload},
                        {"backend", o.backend},
                        {"device", ctx ? ctx->info().name : std::string("cpu")},
                        {"steps", o.steps},
                        {"batch", w.batch},
                        {"compile_s", compile_s},
                        {"loss", losses},
                        {"step_ms", step_ms},
                        {"skipped", skipped}};
  if (compute == DType::f16) doc["loss_scale"] = scales;
  const fs::path out = dir / ("tg_" + o.precision + ".json");
  std::ofstream file(out);
  file << doc.dump(1) << "\n";
  if (!file) throw Error("cannot write " + out.string());
  std::cerr << "wrote " << out.string() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"tensorgrad's loss curve of the char transformer on bench/loss_curve.py's init and batches"};
  app.add_option("--dir", o.dir, "the directory of init.safetensors and batches.safetensors")->required();
  app.add_option("--workload", o.workload, "W2, W2_small or W6")->check(CLI::IsMember({"W2", "W2_small", "W6"}));
  app.add_option("--precision", o.precision, "the compute dtype of TrainingSpec::precision")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}));
  app.add_option("--backend", o.backend, "vulkan, interp_f32 or interp_f64")
      ->check(CLI::IsMember({"vulkan", "interp_f32", "interp_f64"}));
  app.add_option("--steps", o.steps, "steps to train")->check(examples::at_least(1, "STEPS"));
  app.add_option("--w6-batch", o.w6_batch, "W6's batch")->check(examples::at_least(1, "BATCH"));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::cerr << "tg_loss_curve: " << e.what() << "\n";
    return 1;
  }
}
