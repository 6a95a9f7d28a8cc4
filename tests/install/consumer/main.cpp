// Traces a small graph through the installed headers and library, runs it on the f64 oracle and
// checks the result: sum(matmul(x, w) * 2 + 1) with x = [[1,2],[3,4]], w = [[1],[1]] is 22.
#include <tensorgrad/tensorgrad.h>

#include <cmath>
#include <cstdio>
#include <exception>
#include <span>
#include <string>

int main() {
  try {
    tg::GraphBuilder builder("consumer");
    tg::TracingScope scope(builder);
    tg::Tensor x = builder.input("x", {tg::DType::f32, {2, 2}});
    tg::Tensor w = builder.param("w", {tg::DType::f32, {2, 1}});
    builder.output("loss", tg::sum(tg::matmul(x, w) * 2.f + 1.f));
    // The op constants come from the headers generated from ops.def at build time.
    if (builder.graph().nodes().front().op != tg::op::Matmul) {
      std::fprintf(stderr, "FAIL: the first node is %s, not matmul\n",
                   std::string(tg::op_name(builder.graph().nodes().front().op)).c_str());
      return 1;
    }

    tg::TensorMap inputs;
    // x views the caller's floats (no copy); w owns its elements.
    const float x_values[] = {1, 2, 3, 4};
    inputs.emplace("x", tg::HostTensor::view({2, 2}, std::span<const float>(x_values)));
    inputs.emplace("w", tg::HostTensor::f32({2, 1}, {1, 1}));
    tg::InterpOptions options;
    options.compute = tg::ComputeType::f64;
    const tg::InterpResult result = tg::interpret(builder.graph(), inputs, options);

    const double loss = result.outputs.at("loss").at(0);
    std::printf("loss = %.17g (expected 22)\n", loss);
    if (std::abs(loss - 22.0) > 1e-12) {
      std::fprintf(stderr, "FAIL: wrong loss\n");
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAIL: %s\n", e.what());
    return 1;
  }
}
