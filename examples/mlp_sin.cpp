// W1 of design.md: an MLP (Linear(1,64)-relu-Linear(64,64)-relu-Linear(64,1), examples/models.h)
// learning y = sin(x) from batches of 256 points drawn uniformly from [-pi, pi], MSE loss, Adam at
// lr 5e-3. Prints step, loss and steps/s as it trains, then the fit on a grid through an attached
// forward. tg_demo is the same workload with an f64 cross-check and a plot.
//
//   tg_mlp_sin [--steps N] [--backend auto|vulkan|interp_f32|interp_f64] [--seed S] [--log-every K]
//   (tg_mlp_sin --help lists the flags and their defaults)
//
// auto (the default) is Vulkan on the default device (TG_VK_DEVICE picks another) when one
// exists, else interp_f32. --seed sets both the init and the batches (default 1).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "backend_choice.h"
#include "command_line.h"
#include "models.h"
#include "tensorgrad/tensorgrad.h"
#include "tensorgrad/vk/context.h"
#include "tensorgrad/vk/device.h"

namespace {

using tg::examples::BackendChoice;
using tg::examples::choose_backend;
using tg::examples::Mlp;

constexpr std::int64_t kBatch = 256;
constexpr double kLearningRate = 5e-3;
constexpr int kGridPoints = 200;

struct Options {
  int steps = 1000;
  std::string backend = "auto";
  std::uint64_t seed = 1;
  int log_every = 100;
};

// The command line (--help lists it); CLI11 refuses unknown flags and bad values with exit != 0.
void add_options(CLI::App& app, Options& o) {
  app.option_defaults()->always_capture_default();
  app.add_option("--steps", o.steps, "training steps")->check(tg::examples::at_least(1, "POSITIVE"));
  tg::examples::add_backend_option(app, o.backend);
  app.add_option("--seed", o.seed, "seed of the init and of the batches")->check(tg::examples::not_negative());
  app.add_option("--log-every", o.log_every, "print the loss every K steps")
      ->check(tg::examples::at_least(1, "POSITIVE"));
}

// x uniform in [-pi, pi] from raw mt19937_64 bits (portable, unlike uniform_real_distribution).
tg::TensorMap sin_batch(std::mt19937_64& rng) {
  std::vector<float> x(kBatch), y(kBatch);
  for (std::int64_t i = 0; i < kBatch; ++i) {
    const double unit = static_cast<double>(rng() >> 11) * 0x1.0p-53;
    x[i] = static_cast<float>(std::numbers::pi * (2 * unit - 1));
    y[i] = static_cast<float>(std::sin(static_cast<double>(x[i])));
  }
  return {{"x", tg::HostTensor::f32({kBatch, 1}, x)}, {"y", tg::HostTensor::f32({kBatch, 1}, y)}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"W1: an MLP (1-64-64-1, relu) learning y = sin(x) on [-pi, pi] with Adam", "tg_mlp_sin"};
  Options options;
  add_options(app, options);
  CLI11_PARSE(app, argc, argv);
  try {
    const BackendChoice choice = choose_backend(options.backend);
    Mlp model;
    tg::Training training = tg::compile(tg::TrainingSpec<Mlp>{
        .model = model,
        .loss = tg::examples::mlp_loss,
        .inputs = {{"x", {{kBatch, 1}}}, {"y", {{kBatch, 1}}}},
        .optimizer = {.kind = tg::AdamConfig{}},
        .lr = kLearningRate,
        .backend = choice.backend,
        .seed = options.seed,
        .vk_context = choice.context,
    });
    std::printf("W1 on %s: batch %lld, Adam lr %g, seed %llu, %d steps\n", tg::backend_name(training.backend()).data(),
                static_cast<long long>(kBatch), kLearningRate, static_cast<unsigned long long>(options.seed),
                options.steps);

    using Clock = std::chrono::steady_clock;
    std::mt19937_64 rng(options.seed);
    const auto start = Clock::now();
    auto last_time = start;
    int last_step = 0;
    double loss = 0;
    for (int step = 1; step <= options.steps; ++step) {
      const tg::StepResult r = training.step(sin_batch(rng));
      if (!r.ok()) {
        std::fprintf(stderr, "step %d failed (%s): %s\n", step, r.failure().kind.c_str(), r.failure().message.c_str());
        return 1;
      }
      loss = r.loss();
      if (step % options.log_every == 0 || step == options.steps) {
        const auto now = Clock::now();
        std::printf("step %6d  loss %.6f  %8.1f steps/s\n", step, loss,
                    (step - last_step) / std::chrono::duration<double>(now - last_time).count());
        std::fflush(stdout);
        last_time = now;
        last_step = step;
      }
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    std::printf("trained %d steps in %.2f s (%.1f steps/s); final loss %.6f\n", options.steps, seconds,
                options.steps / seconds, loss);

    // The fit on a grid, through a forward that shares the trained params (any batch size: -1).
    tg::Forward predict =
        training.attach(tg::ForwardSpec<Mlp>{.forward = tg::examples::mlp_predict, .inputs = {{"x", {{-1, 1}}}}});
    std::vector<float> grid(kGridPoints);
    for (int i = 0; i < kGridPoints; ++i) {
      grid[i] = static_cast<float>(std::numbers::pi * (-1 + 2.0 * i / (kGridPoints - 1)));
    }
    const tg::ForwardResult r = predict.run({{"x", tg::HostTensor::f32({kGridPoints, 1}, grid)}});
    if (!r.ok()) {
      std::fprintf(stderr, "forward failed (%s): %s\n", r.failure().kind.c_str(), r.failure().message.c_str());
      return 1;
    }
    double worst = 0;
    for (int i = 0; i < kGridPoints; ++i) {
      worst = std::max(worst, std::abs(r.output().at(i) - std::sin(static_cast<double>(grid[i]))));
    }
    std::printf("max |prediction - sin(x)| over %d points in [-pi, pi]: %.4f\n", kGridPoints, worst);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mlp_sin: error: %s\n", e.what());
    return 1;
  }
}
