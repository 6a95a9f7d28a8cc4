#pragma once
// The ops of one ops.def family, read from the registry, and the checks every op of a family gets
// without being named. A family's unit tests (tests/unit/<family>_test.cpp) loop over
// family_ops("<family>"), so an op added to that block of ops.def is checked with no test edit
// (docs/adding-an-op.md). Per-op facts a test pins (a tolerance class, an independent reference)
// stay in optional tables; expect_ops_in_family() keeps such a table honest.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "interp/kernels/broadcast_indexer.h"
#include "support/library.h"

namespace tg::test {

// The registry's ops of `family`, in ops.def order.
inline std::vector<OpId> family_ops(std::string_view family) {
  std::vector<OpId> ops;
  for (OpId id : all_ops()) {
    if (op_family(id) == family) ops.push_back(id);
  }
  return ops;
}

// A pinned table may only name ops of its own family: a table that lists an op of another family
// (or one moved away) fails here instead of silently checking the wrong thing.
inline void expect_ops_in_family(const std::vector<OpId>& pinned, std::string_view family) {
  for (OpId id : pinned) {
    EXPECT_EQ(op_family(id), family) << op_name(id) << " is pinned in the tests of family " << family;
  }
}

template <class Facts>
void expect_ops_in_family(const std::map<OpId, Facts>& pinned, std::string_view family) {
  std::vector<OpId> ids;
  for (const auto& entry : pinned) ids.push_back(entry.first);
  expect_ops_in_family(ids, family);
}

// Every part of the op contract (op_def.h) for one op.
inline void expect_def_parts(OpId id) {
  const OpDef& def = op_def(id);
  EXPECT_EQ(def.name, op_name(id)) << "OpDef name differs from its ops.def line";
  EXPECT_EQ(find_op(def.name), id);
  EXPECT_NE(def.shape, nullptr) << "missing shape rule";
  EXPECT_NE(def.samples, nullptr) << "missing sample generator";
  EXPECT_EQ(def.grad != nullptr, def.differentiable) << "a grad rule exactly when differentiable";
  EXPECT_TRUE(def.arity >= 0 || def.arity == kVariadic) << "arity " << def.arity;
  EXPECT_TRUE(interp_has_kernel(id)) << "missing interpreter kernel";
}

// The values of `type` drawn from `domain`, rounded to what the type holds, so an f32 run and the
// f64 oracle start from the same numbers.
inline HostTensor draw_input(const TensorType& type, const ValueDomain& domain, SampleRng& rng) {
  std::vector<double> values = domain.draw(rng, type.size());
  if (is_float(type.dtype)) {
    for (double& v : values) v = round_to_dtype(v, type.dtype);
  }
  return HostTensor::of(type, std::move(values));
}

// `trials` fresh samples from `seed`: each passes the shape rule, stays small (at most 512 elements
// per input, and in the output unless `bounded_output` is false: concat joins several inputs), has
// one domain per input (the op's arity of them unless variadic), and, given its own input 0 type
// back, the generator keeps that type.
inline void expect_samples_valid(OpId id, std::uint64_t seed, int trials, bool bounded_output = true) {
  const OpDef& def = op_def(id);
  ASSERT_NE(def.samples, nullptr);
  SampleRng rng(seed);
  for (int trial = 0; trial < trials; ++trial) {
    const auto sample = def.samples(rng, std::nullopt);
    ASSERT_TRUE(sample.has_value()) << "a fresh sample must always exist";
    if (def.arity != kVariadic) {
      ASSERT_EQ(sample->inputs.size(), static_cast<std::size_t>(def.arity));
    }
    ASSERT_EQ(sample->domains.size(), sample->inputs.size());
    TensorType out;
    try {
      out = infer_type(id, sample->attrs, sample->inputs);
    } catch (const RuleBroken& broken) {
      FAIL() << "sample refused by the shape rule: " << broken.rule << " " << sample->attrs.to_string();
    }
    if (bounded_output) {
      EXPECT_LE(out.size(), 512);
    }
    for (const TensorType& in : sample->inputs) EXPECT_LE(in.size(), 512) << in.to_string();
    if (!sample->inputs.empty()) {
      const auto again = def.samples(rng, sample->inputs[0]);
      ASSERT_TRUE(again.has_value()) << "declined its own input 0 type " << sample->inputs[0].to_string();
      EXPECT_EQ(again->inputs.at(0), sample->inputs[0]);
      EXPECT_NO_THROW((void)infer_type(id, again->attrs, again->inputs)) << again->attrs.to_string();
    }
  }
}

// The number of f32 ulps one op of `def` may be off in an f32 run, for this sample's reduction
// length (the property suites' per-node bound, tests/support/tolerance.h).
// The samples honour a given first input: one of the dtype the op's samples use, shaped [2,3], is
// used exactly, and an i32 [4] is used exactly or declined. Returns whether the i32 one was taken.
inline bool expect_samples_honour_a_given_first_input(const OpDef& def, SampleRng& rng) {
  const auto fresh = def.samples(rng, std::nullopt);
  EXPECT_TRUE(fresh.has_value());
  if (!fresh) return false;
  const TensorType first{fresh->inputs.at(0).dtype, {2, 3}};
  const auto given = def.samples(rng, first);
  EXPECT_TRUE(given.has_value());
  if (given) {
    EXPECT_EQ(given->inputs[0], first);
  }
  const TensorType ints{DType::i32, {4}};
  const auto from_ints = def.samples(rng, ints);
  if (from_ints) {
    EXPECT_EQ(from_ints->inputs[0], ints);
  }
  return from_ints.has_value();
}

inline double op_tolerance_ulps(const OpDef& def, const OpSample& sample, const TensorType& out) {
  std::int64_t n = 1;
  if (def.reduction_length) {
    n = def.reduction_length(sample.attrs, sample.inputs);
  } else if (!sample.inputs.empty() && out.size() > 0) {
    n = std::max<std::int64_t>(1, sample.inputs[0].size() / out.size());
  }
  return std::max(1.0, tolerance_ulps(def.tolerance, n));
}

// Runs `trials` fresh samples of the op through the interpreter in f64 and in f32 with coverage
// checks on: the result has the shape rule's type, and the f32 run is within the op's tolerance
// class of the f64 oracle (4 eps_f32 x ulps x max(1, largest |value|), as the property suites allow).
inline void expect_runs_and_f32_matches_oracle(OpId id, std::uint64_t seed, int trials) {
  const OpDef& def = op_def(id);
  SampleRng rng(seed);
  for (int trial = 0; trial < trials; ++trial) {
    const auto sample = def.samples(rng, std::nullopt);
    ASSERT_TRUE(sample.has_value());
    SCOPED_TRACE("trial " + std::to_string(trial) + " " + sample->attrs.to_string());
    GraphBuilder b("sample");
    std::vector<Tensor> xs;
    TensorMap feed;
    double scale = 1.0;
    for (std::size_t i = 0; i < sample->inputs.size(); ++i) {
      const std::string name = "x" + std::to_string(i);
      xs.push_back(b.input(name, sample->inputs[i]));
      HostTensor value = draw_input(sample->inputs[i], sample->domains[i], rng);
      for (double v : value.to_f64()) scale = std::max(scale, std::fabs(v));
      feed.emplace(name, std::move(value));
    }
    const TensorType out_type = infer_type(id, sample->attrs, sample->inputs);
    b.output("y", b.emit(id, xs, sample->attrs, SourceLoc{}));
    const Graph graph = b.take();
    const HostTensor oracle =
        interpret(graph, feed, {.compute = ComputeType::f64, .check_coverage = true}).outputs.at("y");
    const HostTensor f32 =
        interpret(graph, feed, {.compute = ComputeType::f32, .check_coverage = true}).outputs.at("y");
    ASSERT_EQ(oracle.type, out_type);
    ASSERT_EQ(f32.type, out_type);
    for (double v : oracle.to_f64()) scale = std::max(scale, std::fabs(v));
    const double bound = 4 * FLT_EPSILON * op_tolerance_ulps(def, *sample, out_type) * scale;
    for (std::size_t j = 0; j < oracle.size(); ++j) {
      ASSERT_NEAR(f32.at(j), oracle.at(j), bound) << "element " << j;
    }
  }
}

// The parts and samples of every op of `family` (expect_def_parts, expect_samples_valid), labelled
// by op; returns the ops so a test can add what it pins per op.
inline std::vector<OpId> expect_family_defs(std::string_view family, std::uint64_t seed, int trials,
                                            bool bounded_output = true) {
  const std::vector<OpId> ops = family_ops(family);
  EXPECT_FALSE(ops.empty()) << "no ops in family " << family;
  for (OpId id : ops) {
    SCOPED_TRACE(std::string(op_name(id)));
    expect_def_parts(id);
    expect_samples_valid(id, seed, trials, bounded_output);
  }
  return ops;
}

// expect_runs_and_f32_matches_oracle for every op of `family`.
inline void expect_family_runs_match_oracle(std::string_view family, std::uint64_t seed, int trials) {
  const std::vector<OpId> ops = family_ops(family);
  EXPECT_FALSE(ops.empty()) << "no ops in family " << family;
  for (OpId id : ops) {
    SCOPED_TRACE(std::string(op_name(id)));
    expect_runs_and_f32_matches_oracle(id, seed, trials);
  }
}

struct GradCheck {
  // Elements probed per input, spread evenly.
  std::size_t probes = 16;
  // Require each cotangent to have its input's type exactly (no broadcast shape left to reduce).
  bool exact_cotangent_type = false;
  // Also require no cotangent for inputs that are not f32 (most families; layout ops pass one
  // through for any dtype).
  bool only_f32_cotangents = true;
};

// Runs the op's grad rule for one sample in f64 and compares each f32 input's cotangent (summed
// over the axes it was broadcast along, when the rule returns the output's broadcast shape) with
// central differences of sum(g * op(inputs)) for a random g. Returns the number of elements
// compared, so a caller can insist that an op was really checked.
inline std::size_t expect_grad_matches_finite_differences(OpId id, const OpSample& sample, SampleRng& rng,
                                                          const GradCheck& options = {}) {
  const OpDef& def = op_def(id);
  EXPECT_NE(def.grad, nullptr);
  if (def.grad == nullptr) return 0;
  TensorMap feed;
  GraphBuilder b("grad");
  TracingScope scope(b);
  std::vector<Tensor> xs;
  for (std::size_t i = 0; i < sample.inputs.size(); ++i) {
    const std::string name = "x" + std::to_string(i);
    xs.push_back(b.input(name, sample.inputs[i]));
    feed.emplace(name, HostTensor::of(sample.inputs[i], sample.domains[i].draw(rng, sample.inputs[i].size())));
  }
  const Tensor y = b.emit(id, xs, sample.attrs, SourceLoc{});
  const TensorType y_type = y.type();
  const Tensor g = b.input("g", y_type);
  std::vector<double> g_values;
  // An integer output (where over i32 branches) has an unused cotangent that must hold integers.
  const bool real_output = y_type.dtype == DType::f32;
  for (std::int64_t j = 0; j < y_type.size(); ++j) g_values.push_back(real_output ? rng.uniform(-1, 1) : 1.0);
  feed.emplace("g", HostTensor::of(y_type, g_values));
  b.output("y", y);
  const auto grads = def.grad(GradArgs{xs, y, g, sample.attrs});
  EXPECT_EQ(grads.size(), xs.size());
  if (grads.size() != xs.size()) return 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const bool real_input = sample.inputs[i].dtype == DType::f32;
    if (real_input) {
      EXPECT_TRUE(grads[i].has_value()) << "no cotangent for f32 input " << i;
    } else if (options.only_f32_cotangents) {
      EXPECT_FALSE(grads[i].has_value()) << "a cotangent for " << sample.inputs[i].to_string() << " input " << i;
    }
    if (real_input && grads[i]) {
      EXPECT_EQ(grads[i]->dtype(), DType::f32) << "input " << i;
      // Either the input's shape, or the output's broadcast shape that autodiff reduces.
      const Shape& in = sample.inputs[i].shape;
      const Shape& got = grads[i]->shape();
      bool broadcasts = got.size() >= in.size();
      for (std::size_t a = 0; broadcasts && a < in.size(); ++a) {
        const std::int64_t d = got[got.size() - in.size() + a];
        broadcasts = in[a] == d || in[a] == 1;
      }
      if (options.exact_cotangent_type) {
        EXPECT_EQ(grads[i]->type(), sample.inputs[i]) << "input " << i;
      }
      EXPECT_TRUE(broadcasts) << "cotangent " << grads[i]->type().to_string() << " for input "
                              << sample.inputs[i].to_string();
      if (!broadcasts) return 0;
      b.output("d" + std::to_string(i), *grads[i]);
    }
  }
  const Graph graph = b.take();
  const auto analytic = interpret(graph, feed).outputs;
  const auto weighted_output = [&](const TensorMap& inputs) {
    const HostTensor out = interpret(graph, inputs).outputs.at("y");
    double total = 0;
    for (std::size_t j = 0; j < out.size(); ++j) total += g_values[j] * out.at(j);
    return total;
  };
  constexpr double kStep = 1e-6;
  std::size_t compared = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const std::string d_name = "d" + std::to_string(i);
    if (!analytic.contains(d_name)) continue;
    const HostTensor& d = analytic.at(d_name);
    // Sum the cotangent over the axes the input was broadcast along, back to the input's shape.
    std::vector<double> grad(static_cast<std::size_t>(sample.inputs[i].size()), 0.0);
    const interp::BroadcastIndexer index(sample.inputs[i].shape, d.type.shape);
    for (std::size_t j = 0; j < d.size(); ++j) {
      grad[static_cast<std::size_t>(index(static_cast<std::int64_t>(j)))] += d.at(j);
    }
    const std::string name = "x" + std::to_string(i);
    const std::size_t stride = std::max<std::size_t>(1, grad.size() / options.probes);
    for (std::size_t e = 0; e < grad.size(); e += stride) {
      TensorMap moved = feed;
      const double v = feed.at(name).at(e);
      moved.at(name).set(e, v + kStep);
      const double up = weighted_output(moved);
      moved.at(name).set(e, v - kStep);
      const double numeric = (up - weighted_output(moved)) / (2 * kStep);
      EXPECT_NEAR(grad[e], numeric, 1e-6 * (1 + std::fabs(numeric))) << "input " << i << " element " << e;
      ++compared;
    }
  }
  return compared;
}

// The grad rule of every differentiable op of `family` on `trials` samples against finite
// differences. With `first_shape`, trial 0 asks for input 0 of that shape (in the dtype of the op's
// fresh samples), so every op is also checked on a shape the test chose; an op that declines it gets
// a fresh sample. Every differentiable op must have had some element compared.
inline void expect_family_grads_match_finite_differences(std::string_view family, std::uint64_t seed, int trials,
                                                         const std::optional<Shape>& first_shape = std::nullopt,
                                                         const GradCheck& options = {}) {
  const std::vector<OpId> ops = family_ops(family);
  ASSERT_FALSE(ops.empty()) << "no ops in family " << family;
  SampleRng rng(seed);
  for (OpId id : ops) {
    const OpDef& def = op_def(id);
    if (!def.differentiable) continue;
    std::size_t compared = 0;
    for (int trial = 0; trial < trials; ++trial) {
      std::optional<OpSample> sample = def.samples(rng, std::nullopt);
      ASSERT_TRUE(sample.has_value()) << def.name;
      if (trial == 0 && first_shape && !sample->inputs.empty()) {
        if (auto chosen = def.samples(rng, TensorType{sample->inputs[0].dtype, *first_shape})) sample = chosen;
      }
      SCOPED_TRACE(std::string(def.name) + " trial " + std::to_string(trial) + " " +
                   (sample->inputs.empty() ? std::string() : sample->inputs[0].to_string()) + " " +
                   sample->attrs.to_string());
      compared += expect_grad_matches_finite_differences(id, *sample, rng, options);
    }
    EXPECT_GT(compared, 0u) << def.name << ": no sample had an f32 input to check";
  }
}

}  // namespace tg::test
