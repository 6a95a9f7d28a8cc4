#pragma once
// capture(name, t): marks an intermediate of a traced forward or loss so that every run returns its
// value. It adds the graph output "capture.<name>" to t's builder and returns t unchanged, so it can
// wrap an expression in place:
//
//   tg::Tensor attn = tg::capture("attn", tg::softmax(scores));  // [B, H, T, T]
//   ...
//   tg::StepResult r = training.step(batch);
//   std::vector<std::vector<double>> heads = r.captures().per_head("attn", H);  // H arrays
//
// Graphs without capture() sites pay nothing. A captured value stays an output of the compiled
// graph, so on Vulkan it is downloaded after every run.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tensorgrad/interp/host_tensor.h"
#include "tensorgrad/ir/tensor.h"

namespace tg {

// The prefix of the graph outputs capture() adds.
inline constexpr std::string_view kCapturePrefix = "capture.";

// Adds output "capture.<name>" = t to t's builder and returns t. Throws tg::Error for an empty
// name, an invalid tensor, or a name captured already in the same graph.
Tensor capture(std::string_view name, const Tensor& t);

// The captured values of one run, keyed by capture name (without the "capture." prefix).
class Captures {
 public:
  Captures() = default;
  // Takes the "capture.*" entries of a run's outputs.
  static Captures from_outputs(const TensorMap& outputs);

  bool empty() const { return values_.empty(); }
  bool contains(std::string_view name) const { return values_.find(name) != values_.end(); }
  std::vector<std::string> names() const;
  // The value (a row-major copy as doubles, whatever the dtype) / its shape / both. Throws tg::Error naming
  // the capture and listing those there are, for an unknown name.
  std::vector<double> get(std::string_view name) const { return tensor(name).to_f64(); }
  const Shape& shape(std::string_view name) const { return tensor(name).type.shape; }
  const HostTensor& tensor(std::string_view name) const;
  // Splits axis 1 (the head axis of the attention layout [B, H, T, T], or [B, H, ...] in general)
  // into `heads` arrays: array h holds the values of [:, h, ...] row-major, i.e. B * T * T values
  // for [B, H, T, T]. Throws tg::Error when the capture has rank < 2 or its axis 1 is not `heads`.
  std::vector<std::vector<double>> per_head(std::string_view name, std::int64_t heads) const;

 private:
  TensorMap values_;
};

}  // namespace tg
