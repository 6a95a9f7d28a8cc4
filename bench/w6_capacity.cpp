// tg_w6_capacity: the largest W6 batch whose training step compiles and runs on Vulkan.
//
// W6 is examples/models.h's CharTransformer at kW6Config (vocab 256, T 1024, d 768, 12 layers, 12
// heads) with W2's optimizer (AdamW lr 1e-3, weight decay 0.01), compiled exactly as
// train/vulkan/W6 of tg_train_bench (bench/transformer_setup.h). For B = start, 2 start, 4 start, ...
// it compiles the training at batch B, runs one untimed step and --steps timed ones; at the first
// failure the doubling stops and the batches between the largest that ran and the first that failed
// are bisected. A try is one JSON object per line, written to --out as it ends (so a run cut short
// keeps what it had) and summarized on stdout:
//   {"batch": 8, "ok": true, "compile_s": 4.1, "nodes": 3500, "plan_bytes": ..., "unshared_bytes": ...,
//    "allocation_bytes": [...], "plan": "3 allocations, ...", "step_ms": [...], "median_step_ms": 151.2,
//    "loss": 5.61}
//   {"batch": 64, "ok": false, "stage": "compile", "error_type": "tg::vk::DeviceError",
//    "error": "Vulkan: ... VK_ERROR_OUT_OF_DEVICE_MEMORY (-2)"}
// and a last line {"summary": true, "largest_ok_batch": 48, "smallest_failed_batch": 49, "stopped": ...}
// ("stopped": "bisected", "first_failure" (--no-bisect), "max_batch", "budget", or "device" when no
// new Vulkan context could be made after a failure). The plan fields are Training::memory_plan():
// every device allocation of the step's buffer plan, their total, and what one slot per value would
// need. After a failure the next try gets a fresh Vulkan context, so a failure cannot leak into it.
//
//   tg_w6_capacity [--out FILE] [--start B] [--max-batch B] [--steps N] [--budget-s S] [--no-bisect]
//                  [--precision f32|bf16|f16] [--tiny]
// --budget-s (default 150): no new try starts after that many seconds. --precision: the step's
// compute dtype (PrecisionPolicy::compute, as train/vulkan/W6_bf16; default f32). --tiny: a shrunk model
// (T 32, d 48, 2 layers, 12 heads) to check the program on lavapipe. Exit 0 when at least one batch
// ran, 1 otherwise, 2 on bad arguments.
#include <cxxabi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <typeinfo>
#include <vector>

#include "examples/command_line.h"
#include "tensorgrad/tensorgrad.h"
#include "tensorgrad/vk/context.h"
#include "transformer_setup.h"

namespace {

using namespace tg;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string out;
  std::int64_t start = 1;
  std::int64_t max_batch = 1024;
  int steps = 3;
  double budget_s = 150;
  bool bisect = true;
  std::string precision = "f32";
  bool tiny = false;
};

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// The dynamic type of an exception, demangled ("tg::vk::DeviceError").
std::string type_name(const std::exception& e) {
  const char* mangled = typeid(e).name();
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string out = status == 0 && demangled ? demangled : mangled;
  std::free(demangled);
  return out;
}

struct Try {
  std::int64_t batch = 0;
  bool ok = false;
  std::string json;  // the whole line
};

Try try_batch(std::int64_t batch, const examples::TransformerConfig& config, int steps, DType compute,
              const std::shared_ptr<vk::Context>& ctx) {
  Try result{.batch = batch};
  std::ostringstream j;
  j << "{\"batch\": " << batch << ", \"precision\": \"" << dtype_name(compute)
    << "\", \"device\": " << json_string(ctx->info().name);
  const auto fail = [&](const std::string& stage, const std::string& type, const std::string& message) {
    j << ", \"ok\": false, \"stage\": \"" << stage << "\", \"error_type\": " << json_string(type)
      << ", \"error\": " << json_string(message) << "}";
    result.json = j.str();
    return result;
  };
  const examples::CharTransformer model(config);
  std::optional<Training> training;
  const auto start = Clock::now();
  try {
    training.emplace(bench::compile_transformer(model, batch, Backend::vulkan, ctx, 2, {.compute = compute}));
  } catch (const std::exception& e) {
    return fail("compile", type_name(e), e.what());
  }
  j << ", \"compile_s\": " << std::chrono::duration<double>(Clock::now() - start).count()
    << ", \"nodes\": " << training->graph().nodes().size();
  const MemoryPlan plan = training->memory_plan();
  j << ", \"plan_bytes\": " << plan.total_bytes << ", \"unshared_bytes\": " << plan.unshared_bytes
    << ", \"allocation_bytes\": [";
  for (std::size_t i = 0; i < plan.allocation_bytes.size(); ++i) j << (i ? ", " : "") << plan.allocation_bytes[i];
  j << "], \"plan\": " << json_string(plan.to_string());
  const TensorMap data = bench::transformer_batch(config, batch);
  std::vector<double> ms;
  double loss = 0;
  for (int i = 0; i <= steps; ++i) {  // step 0 untimed
    const auto t0 = Clock::now();
    const StepResult r = training->step(data);
    const double elapsed = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (!r.ok()) return fail("step", "step failure '" + r.failure().kind + "'", r.failure().message);
    loss = r.loss();
    if (i > 0) ms.push_back(elapsed);
  }
  j << ", \"ok\": true, \"step_ms\": [";
  for (std::size_t i = 0; i < ms.size(); ++i) j << (i ? ", " : "") << ms[i];
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted.empty() ? 0.0 : sorted[(sorted.size() - 1) / 2];
  j << "], \"median_step_ms\": " << median << ", \"loss\": " << loss << "}";
  result.ok = true;
  result.json = j.str();
  return result;
}

// The command line (--help lists it with the defaults).
void add_options(CLI::App& app, Options& o) {
  using tg::examples::at_least;
  app.option_defaults()->always_capture_default();
  app.add_option("--out", o.out, "write one JSON line per try here");
  app.add_option("--start", o.start, "the first batch tried")->check(at_least(1, "POSITIVE"));
  app.add_option("--max-batch", o.max_batch, "no batch above this is tried")->check(at_least(1, "POSITIVE"));
  app.add_option("--steps", o.steps, "timed steps per batch")->check(at_least(1, "POSITIVE"));
  app.add_option("--budget-s", o.budget_s, "no new try starts after this many seconds")
      ->check(tg::examples::not_negative());
  app.add_flag(
      "--no-bisect", [&o](std::int64_t) { o.bisect = false; },
      "stop at the first failure instead of bisecting (default: bisect)");
  app.add_option("--precision", o.precision, "the step's compute dtype")->check(CLI::IsMember({"f32", "bf16", "f16"}));
  app.add_flag("--tiny", o.tiny,
               "a shrunk model (T 32, d 48, 2 layers) to check the program on lavapipe (default: off)");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"The largest W6 batch whose training step compiles and runs on Vulkan", "tg_w6_capacity"};
  add_options(app, o);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help is 0; bad arguments keep the documented 2
  }
  if (o.max_batch < o.start) {
    std::cerr << "tg_w6_capacity: --max-batch " << o.max_batch << " is below --start " << o.start << "\n";
    return 2;
  }
  examples::TransformerConfig config = examples::kW6Config;
  const DType compute = *parse_dtype(o.precision);  // --precision admits only dtype names
  if (o.tiny) config = {.vocab = 256, .context = 32, .width = 48, .layers = 2, .heads = 12};

  std::ofstream out;
  if (!o.out.empty()) {
    out.open(o.out);
    if (!out) {
      std::cerr << "tg_w6_capacity: cannot write " << o.out << "\n";
      return 2;
    }
  }
  const auto emit = [&](const std::string& line) {
    if (out.is_open()) out << line << "\n" << std::flush;
  };

  std::shared_ptr<vk::Context> ctx;
  try {
    ctx = vk::Context::create();
  } catch (const std::exception& e) {
    std::cerr << "tg_w6_capacity: no Vulkan device: " << e.what() << "\n";
    emit("{\"summary\": true, \"largest_ok_batch\": 0, \"stopped\": \"device\", \"error\": " + json_string(e.what()) +
         "}");
    return 1;
  }
  std::cout << "W6 capacity on " << ctx->info().name << ": vocab " << config.vocab << ", T " << config.context << ", d "
            << config.width << ", " << config.layers << " layers, " << config.heads << " heads; " << o.steps
            << " timed steps per batch\n"
            << std::flush;

  const auto began = Clock::now();
  std::int64_t largest_ok = 0;
  std::optional<std::int64_t> first_failed;
  std::string stopped = "max_batch";
  // One try: returns false when the search must stop (budget spent, or no device after a failure).
  const auto attempt = [&](std::int64_t batch, bool& ok) {
    if (std::chrono::duration<double>(Clock::now() - began).count() > o.budget_s) {
      stopped = "budget";
      return false;
    }
    const Try t = try_batch(batch, config, o.steps, compute, ctx);
    emit(t.json);
    std::cout << "B " << batch << ": " << t.json << "\n" << std::flush;
    ok = t.ok;
    if (ok) {
      largest_ok = std::max(largest_ok, batch);
    } else {
      first_failed = std::min(first_failed.value_or(batch), batch);
      try {
        ctx.reset();  // a failure must not leak into the next try: a fresh context
        ctx = vk::Context::create();
      } catch (const std::exception& e) {
        std::cerr << "tg_w6_capacity: no new Vulkan context after a failure: " << e.what() << "\n";
        stopped = "device";
        return false;
      }
    }
    return true;
  };

  bool ok = true;
  bool go_on = true;
  for (std::int64_t batch = o.start; go_on && batch <= o.max_batch; batch *= 2) {
    go_on = attempt(batch, ok);
    if (!ok) break;
  }
  if (go_on && first_failed) {
    stopped = o.bisect ? "bisected" : "first_failure";
    // Bisect between the largest batch that ran (or start - 1) and the first that failed.
    std::int64_t lo = largest_ok > 0 ? largest_ok : o.start - 1, hi = *first_failed;
    while (o.bisect && hi - lo > 1 && go_on) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      go_on = attempt(mid, ok);
      if (!go_on) break;
      (ok ? lo : hi) = mid;
    }
  }
  std::ostringstream summary;
  summary << "{\"summary\": true, \"device\": " << json_string(ctx ? ctx->info().name : "")
          << ", \"largest_ok_batch\": " << largest_ok << ", \"smallest_failed_batch\": ";
  if (first_failed) {
    summary << *first_failed;
  } else {
    summary << "null";
  }
  summary << ", \"stopped\": \"" << stopped
          << "\", \"elapsed_s\": " << std::chrono::duration<double>(Clock::now() - began).count() << "}";
  emit(summary.str());
  std::cout << summary.str() << "\n";
  return largest_ok > 0 ? 0 : 1;
}
