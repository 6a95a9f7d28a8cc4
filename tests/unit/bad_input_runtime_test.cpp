// Bad-input catalogue, runtime (tests/support/bad_input.h): tg::Session runs with missing,
// unknown, misshapen, mistyped and out-of-range inputs, set_param/param misuse, bad writebacks, and
// runs that fail after they start (an index out of range, a NaN loss). run() never throws: its
// failures are checked as results of a kind ("input", "runtime", "nonfinite"). The session's params
// and state are the state: after any failure they hold exactly the bits they held before.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "support/bad_input.h"
#include "tensorgrad/ir/ops/api.h"
#include "tensorgrad/runtime/session.h"

namespace tg {
namespace {

using testing::BadCall;
using testing::BadInputCase;
using testing::reports;
using testing::stateless;
using testing::throw_if_failed;
using testing::throws;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// x, idx, c: data; w: param; steps: state. One step: loss, an embedding lookup into w, and the
// writebacks w <- w - 0.5 * w, steps <- steps + 1, committed only when the loss is finite.
Graph net_graph() {
  GraphBuilder b("net");
  TracingScope scope(b);
  const Tensor x = b.input("x", {DType::f32, {2, 3}});
  const Tensor idx = b.input("idx", {DType::i32, {2}});
  const Tensor c = b.input("c", {DType::boolean, {2, 3}});
  const Tensor w = b.param("w", {DType::f32, {3, 2}});
  const Tensor steps = b.input("steps", {DType::f32, {}}, InputKind::state);
  b.output("loss", sum(matmul(where(c, x, 0.0), w)) + sum(embedding(w, idx)));
  b.output("arg", argmax(x));
  b.output("w.new", w - w * 0.5);
  b.output("steps.new", steps + 1.0);
  return b.take();
}

SessionOptions net_options(Backend backend) {
  return {.backend = backend, .writebacks = {{"w.new", "w"}, {"steps.new", "steps"}}, .commit_if_finite = "loss"};
}

HostTensor f32(Shape shape, std::vector<double> values) {
  return HostTensor::of({DType::f32, std::move(shape)}, std::move(values));
}
// A tensor whose value count may disagree with its type (HostTensor::of would refuse it).
// Wide storage (HostTensor::of): the only kind that can hold an i32 fraction or a bool 2.
HostTensor wide(TensorType type, std::vector<double> values) {
  return HostTensor::of(std::move(type), std::move(values));
}
HostTensor good_x() { return f32({2, 3}, {0.5, -1, 2, 0.25, 3, -2}); }
HostTensor good_w() { return f32({3, 2}, {0.1, 0.2, -0.3, 0.4, 0.5, -0.6}); }
HostTensor good_idx() { return HostTensor::i32({2}, {2, 0}); }
HostTensor good_c() { return HostTensor::of({DType::boolean, {2, 3}}, {1, 0, 1, 1, 1, 0}); }
TensorMap good_data() { return {{"x", good_x()}, {"idx", good_idx()}, {"c", good_c()}}; }

// A session after one completed run (so the writebacks have moved w and steps off their initial
// values), with the state snapshot of its params.
struct Ran {
  std::shared_ptr<Session> session;
  std::function<std::string()> state() const {
    return [s = session] {
      std::string out;
      for (const GraphInput& in : s->graph().inputs()) {
        if (in.kind == InputKind::data) continue;
        const auto unset = s->unset_params();
        if (std::find(unset.begin(), unset.end(), in.name) != unset.end()) continue;
        out += in.name + " = " + testing::bits(s->param(in.name)) + "\n";
      }
      return out;
    };
  }
};
Ran ran_session(Backend backend = Backend::interp_f32, bool set_w = true) {
  auto s = std::make_shared<Session>(net_graph(), net_options(backend));
  if (set_w) s->set_param("w", good_w());
  s->set_param("steps", f32({}, {0}));
  if (set_w && !s->run(good_data()).ok()) throw Error("the setup run failed");
  return {s};
}

// run(data with `edit` applied) must fail with `kind`; params and state untouched.
BadInputCase bad_run(std::string name, std::function<void(TensorMap&)> edit, std::string kind,
                     std::vector<std::string> fragments, Backend backend = Backend::interp_f32, bool set_w = true) {
  return {.name = std::move(name),
          .setup =
              [edit, backend, set_w] {
                const Ran ran = ran_session(backend, set_w);
                TensorMap data = good_data();
                edit(data);
                return BadCall{[s = ran.session, data] { throw_if_failed(s->run(data)); }, ran.state()};
              },
          .expected = reports(std::move(kind)),
          .fragments = std::move(fragments)};
}

// A call on a ran session that must throw E; params and state untouched.
template <class E>
BadInputCase bad_session_call(std::string name, std::function<void(Session&)> call, std::vector<std::string> fragments,
                              bool set_w = true) {
  return {.name = std::move(name),
          .setup =
              [call, set_w] {
                const Ran ran = ran_session(Backend::interp_f32, set_w);
                return BadCall{[s = ran.session, call] { call(*s); }, ran.state()};
              },
          .expected = throws<E>(),
          .fragments = std::move(fragments)};
}

// A RunResult accessor on the wrong branch: the run (in the setup) is fine, the accessor refuses.
BadInputCase bad_result_call(std::string name, TensorMap data, std::function<void(const RunResult&)> call,
                             std::vector<std::string> fragments) {
  return {.name = std::move(name),
          .setup =
              [data, call] {
                const Ran ran = ran_session();
                auto result = std::make_shared<RunResult>(ran.session->run(data));
                return BadCall{[result, call] { call(*result); }, ran.state()};
              },
          .expected = throws<RuntimeError>(),
          .fragments = std::move(fragments)};
}

std::vector<BadInputCase> run_input_cases() {
  return {
      bad_run("missing_data_input", [](TensorMap& d) { d.erase("x"); }, "input",
              {"missing input 'x' (data, f32[2,3])"}),
      // A good param then an infinite one passed with the data: neither is set.
      bad_run("param_with_the_data_infinite",
              [](TensorMap& d) {
                d.emplace("steps", f32({}, {5}));
                d.emplace("w", f32({3, 2}, {0.1, 0.2, 0.3, INFINITY, 0.5, 0.6}));
              },
              "input", {"param 'w' of graph 'net' holds +Inf at element 3"}),
      bad_run("unknown_input", [](TensorMap& d) { d.emplace("z", good_x()); }, "input",
              {"graph 'net' has no input named 'z'"}),
      bad_run("transposed_shape",
              [](TensorMap& d) {
                d["x"] = f32({3, 2}, std::vector<double>(6, 1));
              },
              "input", {"input 'x' expects f32[2,3], got f32[3,2]"}),
      bad_run("extra_leading_axis",
              [](TensorMap& d) {
                d["x"] = f32({1, 2, 3}, std::vector<double>(6, 1));
              },
              "input", {"input 'x' expects f32[2,3], got f32[1,2,3]"}),
      bad_run("scalar_for_a_matrix", [](TensorMap& d) { d["x"] = f32({}, {1}); }, "input",
              {"input 'x' expects f32[2,3], got f32[]"}),
      bad_run("i32_for_f32",
              [](TensorMap& d) {
                d["x"] = HostTensor::i32({2, 3}, {1, 2, 3, 4, 5, 6});
              },
              "input", {"input 'x' expects f32[2,3], got i32[2,3]"}),
      bad_run("f32_for_i32",
              [](TensorMap& d) {
                d["idx"] = f32({2}, {1, 0});
              },
              "input", {"input 'idx' expects i32[2], got f32[2]"}),
      bad_run("f32_for_bool",
              [](TensorMap& d) {
                d["c"] = f32({2, 3}, std::vector<double>(6, 1));
              },
              "input", {"input 'c' expects bool[2,3], got f32[2,3]"}),
      bad_run("too_few_values",
              [](TensorMap& d) {
                d["x"] = wide({DType::f32, {5}}, {1, 2, 3, 4, 5});
              },
              "input", {"input 'x' expects f32[2,3], got f32[5]"}),
      bad_run("too_many_values",
              [](TensorMap& d) {
                d["x"] = wide({DType::f32, {7}}, std::vector<double>(7, 1));
              },
              "input", {"input 'x' expects f32[2,3], got f32[7]"}),
      bad_run("i32_holds_a_fraction", [](TensorMap& d) { d["idx"].mutable_wide()[1] = 1.5; }, "input",
              {"input 'idx' is i32 but holds 1.5"}),
      bad_run("i32_holds_3e9", [](TensorMap& d) { d["idx"].mutable_wide()[0] = 3e9; }, "input",
              {"input 'idx' is i32 but holds 3000000000"}),
      bad_run("i32_holds_nan", [](TensorMap& d) { d["idx"].mutable_wide()[0] = kNaN; }, "input",
              {"input 'idx' is i32 but holds nan"}),
      bad_run("bool_holds_two", [](TensorMap& d) { d["c"].mutable_wide()[4] = 2; }, "input",
              {"input 'c' is bool but holds 2"}),
      bad_run("bool_holds_a_half", [](TensorMap& d) { d["c"].mutable_wide()[0] = 0.5; }, "input",
              {"input 'c' is bool but holds 0.5"}),
      bad_run("param_of_the_wrong_shape",
              [](TensorMap& d) {
                d.emplace("w", f32({2, 3}, std::vector<double>(6, 1)));
              },
              "input", {"param 'w' of graph 'net': expected f32[3,2], got f32[2,3]", "looks transposed"}),
      bad_run("state_of_the_wrong_dtype", [](TensorMap& d) { d.emplace("steps", HostTensor::i32({}, {3})); }, "input",
              {"state 'steps' of graph 'net': expected f32[], got i32[]"}),
      bad_run(
          "unset_param", [](TensorMap&) {}, "input",
          {"missing param 'w' (f32[3,2]): set it with set_param() before running"}, Backend::interp_f32, false),
  };
}

// Failures where the run could have changed state: a good param passed with a bad data input, an
// index out of range found while running, a NaN or Inf loss. Both interpreter backends (interp_f64
// keeps params unrounded, interp_f32 rounds them).
std::vector<BadInputCase> run_state_cases() {
  std::vector<BadInputCase> out;
  for (const Backend backend : {Backend::interp_f32, Backend::interp_f64}) {
    const std::string b = "_" + std::string(backend_name(backend));
    out.push_back(bad_run(
        "good_param_with_a_bad_data_input" + b,
        [](TensorMap& d) {
          d.emplace("w", f32({3, 2}, std::vector<double>(6, 9)));
          d["x"] = f32({2, 2}, {1, 2, 3, 4});
        },
        "input", {"input 'x' expects f32[2,3], got f32[2,2]"}, backend));
    out.push_back(bad_run(
        "embedding_index_past_the_table" + b, [](TensorMap& d) { d["idx"].set(1, 7); }, "runtime",
        {"embedding", "index 7 is out of range [0, 3) at element 1"}, backend));
    out.push_back(bad_run(
        "embedding_index_negative" + b, [](TensorMap& d) { d["idx"].set(0, -1); }, "runtime",
        {"embedding", "index -1 is out of range [0, 3) at element 0"}, backend));
    out.push_back(bad_run(
        "nan_loss" + b, [](TensorMap& d) { d["x"].set(2, kNaN); }, "nonfinite",
        {"output 'loss' is nan", "params and state are as they were before it"}, backend));
    out.push_back(bad_run(
        "infinite_loss" + b, [](TensorMap& d) { d["x"].set(0, kInf); }, "nonfinite",
        {"output 'loss' is", "the run's updates were discarded"}, backend));
  }
  return out;
}

std::vector<BadInputCase> param_cases() {
  return {
      bad_session_call<RuntimeError>("set_param_unknown_name", [](Session& s) { s.set_param("q", good_w()); },
                                     {"graph 'net' has no param or state named 'q'"}),
      bad_session_call<RuntimeError>("set_param_empty_name", [](Session& s) { s.set_param("", good_w()); },
                                     {"graph 'net' has no param or state named ''"}),
      bad_session_call<RuntimeError>("set_param_of_a_data_input", [](Session& s) { s.set_param("x", good_x()); },
                                     {"'x' of graph 'net' is a data input: pass it to run(), not set_param()"}),
      bad_session_call<RuntimeError>("set_param_wrong_shape",
                                     [](Session& s) {
                                       s.set_param("w", f32({2, 3}, std::vector<double>(6, 1)));
                                     },
                                     {"param 'w' of graph 'net': expected f32[3,2], got f32[2,3]", "looks transposed"}),
      bad_session_call<RuntimeError>("set_param_wrong_dtype",
                                     [](Session& s) {
                                       s.set_param("w", HostTensor::i32({3, 2}, {1, 2, 3, 4, 5, 6}));
                                     },
                                     {"param 'w' of graph 'net': expected f32[3,2], got i32[3,2]"}),
      bad_session_call<RuntimeError>("set_param_wrong_count",
                                     [](Session& s) {
                                       s.set_param("w", wide({DType::f32, {2}}, {1, 2}));
                                     },
                                     {"param 'w' of graph 'net': expected f32[3,2], got f32[2]"}),
      bad_session_call<RuntimeError>("set_state_wrong_rank", [](Session& s) { s.set_param("steps", f32({1}, {1})); },
                                     {"state 'steps' of graph 'net': expected f32[], got f32[1]"}),
      bad_session_call<RuntimeError>("set_param_nan",
                                     [](Session& s) {
                                       s.set_param("w", f32({3, 2}, {0.1, 0.2, std::nan(""), 0.4, 0.5, 0.6}));
                                     },
                                     {"param 'w' of graph 'net' holds NaN at element 2", "allow_nonfinite_params"}),
      bad_session_call<RuntimeError>("set_state_infinite",
                                     [](Session& s) { s.set_param("steps", f32({}, {-INFINITY})); },
                                     {"state 'steps' of graph 'net' holds -Inf at element 0"}),
      bad_session_call<RuntimeError>("param_unknown_name", [](Session& s) { (void)s.param("q"); },
                                     {"graph 'net' has no param or state named 'q'"}),
      bad_session_call<RuntimeError>("param_of_a_data_input", [](Session& s) { (void)s.param("idx"); },
                                     {"'idx' of graph 'net' is a data input"}),
      bad_session_call<RuntimeError>(
          "param_not_set_yet", [](Session& s) { (void)s.param("w"); }, {"param 'w' of graph 'net' has not been set"},
          false),
      bad_result_call("output_of_a_completed_run_unknown_name", good_data(),
                      [](const RunResult& r) { (void)r.output("nope"); }, {"the run has no output named 'nope'"}),
      bad_result_call("outputs_of_a_failed_run", {}, [](const RunResult& r) { (void)r.outputs(); },
                      {"the run failed (input): missing input"}),
      bad_result_call("failure_of_a_completed_run", good_data(), [](const RunResult& r) { (void)r.failure(); },
                      {"the run completed; it has no failure"}),
  };
}

// Options the constructor refuses (tg::CompileError naming the writeback or output and the graph).
BadInputCase bad_options(std::string name, SessionOptions options, std::vector<std::string> fragments) {
  return {.name = std::move(name),
          .setup = stateless([options] { Session s(net_graph(), options); }),
          .expected = throws<CompileError>(),
          .fragments = std::move(fragments)};
}

std::vector<BadInputCase> option_cases() {
  return {
      bad_options("writeback_from_a_missing_output", {.writebacks = {{"w.newer", "w"}}},
                  {"writeback 'w.newer' -> 'w' of graph 'net'", "no output named 'w.newer'"}),
      bad_options("writeback_into_a_missing_input", {.writebacks = {{"w.new", "v"}}},
                  {"writeback 'w.new' -> 'v' of graph 'net'", "no input named 'v'"}),
      bad_options("writeback_into_a_data_input", {.writebacks = {{"steps.new", "x"}}},
                  {"writeback 'steps.new' -> 'x'", "the input is not resident (a param or state)"}),
      bad_options("writeback_of_another_type", {.writebacks = {{"loss", "w"}}},
                  {"writeback 'loss' -> 'w'", "the output is f32[] but the input is f32[3,2]"}),
      bad_options("two_writebacks_into_one_input", {.writebacks = {{"w.new", "w"}, {"w.new", "w"}}},
                  {"writeback 'w.new' -> 'w'", "the input is the target of another writeback"}),
      bad_options("commit_if_finite_unknown_output", {.commit_if_finite = "los"},
                  {"commit_if_finite names 'los', which is not a float output of graph 'net'"}),
      bad_options("commit_if_finite_i32_output", {.commit_if_finite = "arg"},
                  {"commit_if_finite names 'arg', which is not a float output of graph 'net'"}),
  };
}

std::vector<BadInputCase> host_tensor_cases() {
  return {
      {.name = "host_tensor_too_few_values",
       .setup = stateless([] {
         (void)HostTensor::f32({2, 3}, {1, 2, 3, 4, 5});
       }),
       .expected = throws<RuntimeError>(),
       .fragments = {"a tensor of type f32[2,3] needs 6 elements, got 5"}},
      {.name = "host_tensor_of_2_pow_40_elements",
       .setup = stateless([] {
         (void)HostTensor::of({DType::f32, {std::int64_t{1} << 40}}, {});
       }),
       .expected = throws<RuntimeError>(),
       .fragments = {"f32[1099511627776] needs 1099511627776 elements, got 0"}},
  };
}

std::vector<BadInputCase> runtime_table() {
  std::vector<BadInputCase> all;
  for (auto part : {run_input_cases(), run_state_cases(), param_cases(), option_cases(), host_tensor_cases()}) {
    for (BadInputCase& c : part) all.push_back(std::move(c));
  }
  return all;
}

TG_BAD_INPUT_SUITE(Runtime, runtime_table);

}  // namespace
}  // namespace tg
