// Loss kernels: nll_loss and the fused cross_entropy over the last (class) axis. Positions run in
// parallel; a "sum" or "mean" adds the per-position losses in fixed blocks combined in order, so the
// bits never depend on the thread count. Targets are checked in one sequential pass first.
#include "tensorgrad/ir/ops/ids/losses.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <string_view>

#include "../parallel.h"
#include "families.h"
#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/launch_paths.h"

namespace tg::interp {

namespace {

constexpr std::int64_t kGrain = 4096;
const SizeThreshold kGrainThreshold("interp", "losses", "grain", kGrain);
const SizeThreshold kSumBlockThreshold("interp", "losses", "sum block", 4096);  // deterministic_sum's

// Per-position losses written out (reduction "none"), or summed (reduction "sum" or "mean").
struct LossPaths {
  LaunchPath per_position, reduced;
};
const LossPaths kNllLossPaths{{"interp", "nll_loss", "per_position"}, {"interp", "nll_loss", "reduced"}};
const LossPaths kCrossEntropyPaths{{"interp", "cross_entropy", "per_position"}, {"interp", "cross_entropy", "reduced"}};

void require_targets_in_range(std::string_view op, std::span<const std::int32_t> targets, std::int64_t classes) {
  for (std::size_t i = 0; i < targets.size(); ++i) {
    if (targets[i] < 0 || targets[i] >= classes) {
      throw RuntimeError(std::string(op) + ": target " + std::to_string(targets[i]) + " is out of range [0, " +
                         std::to_string(classes) + ") at element " + std::to_string(i));
    }
  }
}

// Writes the per-position losses (reduction "none") or their sum or mean into the output.
template <class T, class PositionLoss>
void reduce_losses(const KernelCall<T>& call, const LossPaths& paths, std::int64_t positions, std::int64_t classes,
                   PositionLoss&& loss) {
  const std::string& reduction = call.attrs().string("reduction");
  (reduction == "none" ? paths.per_position : paths.reduced).hit();
  T* out = call.output.real.data();
  const std::int64_t grain = std::max<std::int64_t>(1, kGrain / classes);
  if (reduction == "none") {
    parallel_chunks(positions, grain, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t n = begin; n < end; ++n) out[n] = loss(n);
    });
    return;
  }
  // Each position's loss once (in parallel), then a sum whose order is fixed.
  std::vector<T> per_position(static_cast<std::size_t>(positions));
  parallel_chunks(positions, grain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t n = begin; n < end; ++n) per_position[static_cast<std::size_t>(n)] = loss(n);
  });
  const T total =
      deterministic_sum<T>(positions, [&](std::int64_t n) { return per_position[static_cast<std::size_t>(n)]; });
  // The mean of no positions is NaN, as in PyTorch.
  out[0] = reduction == "mean" ? total / static_cast<T>(positions) : total;
}

template <class T>
void nll_loss_kernel(const KernelCall<T>& call) {
  const std::int64_t classes = call.in_type(0).shape.back();
  const auto& targets = call.ints(1);
  require_targets_in_range("nll_loss", targets, classes);
  const T* log_probs = call.real(0).data();
  reduce_losses(call, kNllLossPaths, static_cast<std::int64_t>(targets.size()), classes,
                [&](std::int64_t n) { return -log_probs[n * classes + targets[static_cast<std::size_t>(n)]]; });
}

// loss = log(sum_j exp(x_j - m)) + (m - x_target) with m the row maximum: both terms are >= 0, so
// nothing cancels, and exp never overflows.
template <class T>
void cross_entropy_kernel(const KernelCall<T>& call) {
  const std::int64_t classes = call.in_type(0).shape.back();
  const auto& targets = call.ints(1);
  require_targets_in_range("cross_entropy", targets, classes);
  const T* logits = call.real(0).data();
  reduce_losses(call, kCrossEntropyPaths, static_cast<std::int64_t>(targets.size()), classes, [&](std::int64_t n) {
    const T* row = logits + n * classes;
    T row_max = -std::numeric_limits<T>::infinity();
    for (std::int64_t j = 0; j < classes; ++j) row_max = std::max(row_max, row[j]);
    T total = 0;
    for (std::int64_t j = 0; j < classes; ++j) total += std::exp(row[j] - row_max);
    return std::log(total) + (row_max - row[targets[static_cast<std::size_t>(n)]]);
  });
}

}  // namespace

template <class T>
void register_losses_kernels(KernelTable<T>& table) {
  table[static_cast<std::size_t>(op::NllLoss)] = nll_loss_kernel<T>;
  table[static_cast<std::size_t>(op::CrossEntropy)] = cross_entropy_kernel<T>;
}

template void register_losses_kernels<float>(KernelTable<float>&);
template void register_losses_kernels<double>(KernelTable<double>&);

}  // namespace tg::interp
