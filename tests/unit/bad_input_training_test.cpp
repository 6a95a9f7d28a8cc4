// Bad-input catalogue, training (tests/support/bad_input.h): Training::step with bad batches and
// non-finite losses, upload_params with unknown names, wrong sizes and NaN/Inf, load of missing,
// foreign, corrupt or hostile checkpoints, saves the file system refuses, and compile/attach/forward
// specs that cannot work. The state is everything a training holds: params, optimizer state, the
// step counter, and the files in its scratch directory, compared bit for bit before and after.
#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "support/bad_input.h"
#include "tensorgrad/train/nn.h"
#include "tensorgrad/train/safetensors.h"
#include "tensorgrad/train/training.h"

namespace tg {
namespace {

using testing::BadCall;
using testing::BadInputCase;
using testing::reports;
using testing::ScratchDir;
using testing::stateless;
using testing::throw_if_failed;
using testing::throws;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

struct Net : Module {
  Linear l1{*this, "l1", 2, 1};
};
struct Wide : Module {  // another model: l1.W is f32[3,1]
  Linear l1{*this, "l1", 3, 1};
};
struct NoParams : Module {};

Tensor net_loss(const Net& m, const Inputs& in) {
  const Tensor r = m.l1(in.at("x")) - in.at("y");
  return mean(r * r);
}
Tensor net_forward(const Net& m, const Inputs& in) { return m.l1(in.at("x")); }

const InputSpecs kInputs = {{"x", {{4, 2}}}, {"y", {{4, 1}}}};

HostTensor f32(Shape shape, std::vector<double> values) {
  return HostTensor::of({DType::f32, std::move(shape)}, std::move(values));
}
TensorMap good_batch() {
  return {{"x", f32({4, 2}, {0.5, -1, 2, 0.25, -0.75, 1.5, 1, -2})}, {"y", f32({4, 1}, {1, -1, 0.5, 2})}};
}

// A training after two completed Adam steps (so params, moments and the step counter are all off
// their initial values), a scratch directory with a good checkpoint of it, and the state snapshot.
struct Trained {
  std::shared_ptr<Net> net = std::make_shared<Net>();
  std::shared_ptr<Training> train;
  std::shared_ptr<ScratchDir> dir = std::make_shared<ScratchDir>("training");
  std::string checkpoint = dir->file("good.safetensors");

  explicit Trained(bool step = true) {
    train = std::make_shared<Training>(compile(TrainingSpec<Net>{.model = *net,
                                                                 .loss = net_loss,
                                                                 .inputs = kInputs,
                                                                 .optimizer = {.kind = AdamConfig{}},
                                                                 .lr = 0.1,
                                                                 .seed = 3}));
    if (step) {
      for (int i = 0; i < 2; ++i)
        if (!train->step(good_batch()).ok()) throw Error("the setup step failed");
    }
    train->save(checkpoint);
  }
  std::function<std::string()> state() const {
    return [t = train, d = dir] {
      return testing::bits(t->download_param_tensors()) + testing::bits(t->download_optimizer_state()) +
             "steps = " + std::to_string(t->steps()) + "\n" + testing::directory_state(d->path());
    };
  }
  BadCall with(std::function<void(Training&)> call) const {
    return BadCall{[t = train, n = net, call] { call(*t); }, state()};
  }
};

template <class E>
BadInputCase on_training(std::string name, std::function<void(Training&)> call, std::vector<std::string> fragments,
                         bool step_first = true) {
  return {.name = std::move(name),
          .setup = [call, step_first] { return Trained(step_first).with(call); },
          .expected = throws<E>(),
          .fragments = std::move(fragments)};
}

BadInputCase bad_step(std::string name, std::function<void(TensorMap&)> edit, std::string kind,
                      std::vector<std::string> fragments) {
  return {.name = std::move(name),
          .setup =
              [edit] {
                TensorMap batch = good_batch();
                edit(batch);
                return Trained().with([batch](Training& t) { throw_if_failed(t.step(batch)); });
              },
          .expected = reports(std::move(kind)),
          .fragments = std::move(fragments)};
}

std::vector<BadInputCase> step_cases() {
  return {
      bad_step("step_missing_input", [](TensorMap& b) { b.erase("y"); }, "input",
               {"step: missing input 'y' (f32[4,1])"}),
      bad_step("step_empty_batch", [](TensorMap& b) { b.clear(); }, "input",
               {"missing input 'x' (f32[4,2])", "missing input 'y' (f32[4,1])"}),
      bad_step("step_unknown_input", [](TensorMap& b) { b.emplace("z", f32({1}, {0})); }, "input",
               {"unknown input 'z' (the declared inputs are"}),
      bad_step("step_transposed_batch",
               [](TensorMap& b) {
                 b["x"] = f32({2, 4}, std::vector<double>(8, 1));
               },
               "input", {"input 'x': expected f32[4,2], got f32[2,4]"}),
      bad_step("step_batch_of_another_size",
               [](TensorMap& b) {
                 b["y"] = f32({8, 1}, std::vector<double>(8, 1));
               },
               "input", {"input 'y': expected f32[4,1], got f32[8,1]"}),
      bad_step("step_i32_batch",
               [](TensorMap& b) {
                 b["x"] = HostTensor::i32({4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
               },
               "input", {"input 'x': expected f32[4,2], got i32[4,2]"}),
      bad_step("step_one_row_short",
               [](TensorMap& b) {
                 b["y"] = HostTensor::f32({3, 1}, {0.F, 0.F, 0.F});
               },
               "input", {"input 'y': expected f32[4,1], got f32[3,1]"}),
      bad_step("step_nan_in_the_batch", [](TensorMap& b) { b["x"].set(3, kNaN); }, "nonfinite",
               {"output 'loss' is nan"}),
      bad_step("step_inf_target", [](TensorMap& b) { b["y"].set(0, kInf); }, "nonfinite", {"output 'loss' is"}),
      bad_step("step_loss_overflows_f32", [](TensorMap& b) { b["x"].set(0, 1e30); }, "nonfinite",
               {"output 'loss' is inf"}),
  };
}

std::vector<BadInputCase> param_cases() {
  return {
      on_training<RuntimeError>("upload_unknown_param",
                                [](Training& t) {
                                  t.upload_params({{"l2.W", {1, 2}}});
                                },
                                {"upload_params: unknown param 'l2.W'", "nothing was written"}),
      on_training<RuntimeError>("upload_wrong_size",
                                [](Training& t) {
                                  t.upload_params({{"l1.W", {1, 2, 3}}});
                                },
                                {"param 'l1.W' is f32[2,1] (2 values), got 3 values"}),
      on_training<RuntimeError>("upload_nan",
                                [](Training& t) {
                                  t.upload_params({{"l1.W", {1, std::nanf("")}}});
                                },
                                {"upload_params", "'l1.W'", "nan"}),
      on_training<RuntimeError>("upload_inf",
                                [](Training& t) {
                                  t.upload_params({{"l1.b", {std::numeric_limits<float>::infinity()}}});
                                },
                                {"upload_params", "'l1.b'", "inf"}),
      on_training<RuntimeError>("upload_one_good_one_bad",
                                [](Training& t) {
                                  t.upload_params({{"l1.W", {5, 6}}, {"l1.b", {1, 2}}});
                                },
                                {"param 'l1.b' is f32[1] (1 values), got 2 values", "nothing was written"}),
      on_training<RuntimeError>(
          "forward_upload_unknown_param",
          [](Training& t) {
            Forward f = t.attach(ForwardSpec<Net>{.forward = net_forward, .inputs = {{"x", {{-1, 2}}}}});
            f.upload_params({{"l1.w", {1, 2}}});
          },
          {"unknown param 'l1.w'"}),
      on_training<Error>(
          "grads_before_any_step", [](Training& t) { (void)t.download_param_grads(); },
          {"download_param_grads: no step has completed yet"}, false),
      on_training<Error>("set_lr_negative", [](Training& t) { t.set_lr(-0.5); }, {"lr schedule", "must be >= 0"}),
      on_training<Error>("set_lr_nan", [](Training& t) { t.set_lr(kNaN); }, {"lr schedule", "must be >= 0 and finite"}),
  };
}

// ---- load and save ----

// Writes a variant of the good checkpoint to `name` in the scratch directory and loads it.
using Rewrite = std::function<void(SafetensorsFile&)>;
BadInputCase bad_checkpoint(std::string name, Rewrite rewrite, std::vector<std::string> fragments) {
  return {.name = std::move(name),
          .setup =
              [rewrite] {
                Trained t;
                SafetensorsFile file = load_safetensors(t.checkpoint);
                rewrite(file);
                const std::string path = t.dir->file("bad.safetensors");
                save_safetensors(path, file.tensors, file.metadata);
                return t.with([path](Training& tr) { tr.load(path); });
              },
          .expected = throws<SafetensorsError>(),
          .fragments = std::move(fragments)};
}

// Loads a file made from the good checkpoint's bytes.
BadInputCase bad_checkpoint_bytes(std::string name, std::function<std::string(std::string)> edit,
                                  std::vector<std::string> fragments) {
  return {.name = std::move(name),
          .setup =
              [edit] {
                Trained t;
                const std::string path = t.dir->file("bad.safetensors");
                std::ofstream(path, std::ios::binary) << edit(testing::file_bytes(t.checkpoint));
                return t.with([path](Training& tr) { tr.load(path); });
              },
          .expected = throws<SafetensorsError>(),
          .fragments = std::move(fragments)};
}

std::vector<BadInputCase> load_cases() {
  return {
      on_training<SafetensorsError>("load_missing_file", [](Training& t) { t.load("/nonexistent/ckpt.safetensors"); },
                                    {"/nonexistent/ckpt.safetensors", "No such file or directory"}),
      {.name = "load_a_directory",
       .setup =
           [] {
             Trained t;
             return t.with([p = t.dir->path().string()](Training& tr) { tr.load(p); });
           },
       .expected = throws<SafetensorsError>(),
       .fragments = {"tg_bad_input_training", "directory"}},
      {.name = "load_a_fifo",
       .setup =
           [] {
             Trained t;
             const std::string fifo = t.dir->file("pipe");
             if (::mkfifo(fifo.c_str(), 0600) != 0) throw Error("mkfifo failed");
             return t.with([fifo](Training& tr) { tr.load(fifo); });
           },
       .expected = throws<SafetensorsError>(),
       .fragments = {"pipe", "not a regular file"}},
      bad_checkpoint_bytes("load_empty_file", [](std::string) { return std::string(); },
                           {"bad.safetensors", "0 bytes, fewer than the 8-byte header length"}),
      bad_checkpoint_bytes("load_truncated_checkpoint", [](std::string s) { return s.substr(0, s.size() / 2); },
                           {"bad.safetensors"}),
      bad_checkpoint_bytes("load_last_byte_missing", [](std::string s) { return s.substr(0, s.size() - 1); },
                           {"bad.safetensors"}),
      bad_checkpoint_bytes("load_header_brace_flipped",
                           [](std::string s) {
                             s[8] = '[';
                             return s;
                           },
                           {"bad.safetensors", "the header does not start with '{'"}),
      bad_checkpoint("load_missing_tensor", [](SafetensorsFile& f) { f.tensors.erase("l1.b"); },
                     {"bad.safetensors", "does not hold the expected tensors", "missing: 'l1.b' f32[1]"}),
      bad_checkpoint("load_extra_tensor", [](SafetensorsFile& f) { f.tensors.emplace("l2.W", f32({1}, {0})); },
                     {"bad.safetensors", "unexpected: 'l2.W' f32[1]"}),
      bad_checkpoint("load_param_of_another_shape",
                     [](SafetensorsFile& f) {
                       f.tensors["l1.W"] = f32({3, 1}, {1, 2, 3});
                     },
                     {"'l1.W': expected f32[2,1], found f32[3,1]"}),
      bad_checkpoint("load_param_of_another_dtype",
                     [](SafetensorsFile& f) {
                       f.tensors["l1.W"] = HostTensor::i32({2, 1}, {1, 2});
                     },
                     {"'l1.W': expected f32[2,1], found i32[2,1]"}),
      bad_checkpoint("load_without_step", [](SafetensorsFile& f) { f.metadata.erase("tensorgrad.step"); },
                     {"bad.safetensors", "metadata 'tensorgrad.step' (the step counter) is missing"}),
      bad_checkpoint("load_step_not_a_number", [](SafetensorsFile& f) { f.metadata["tensorgrad.step"] = "abc"; },
                     {"metadata 'tensorgrad.step' is \"abc\"; it must be a decimal integer"}),
      bad_checkpoint("load_step_negative", [](SafetensorsFile& f) { f.metadata["tensorgrad.step"] = "-1"; },
                     {"metadata 'tensorgrad.step' is \"-1\""}),
      bad_checkpoint("load_step_2_pow_63_minus_1",
                     [](SafetensorsFile& f) { f.metadata["tensorgrad.step"] = "9223372036854775807"; },
                     {"metadata 'tensorgrad.step' is \"9223372036854775807\"", "[0, 9007199254740992]"}),
      bad_checkpoint("load_seed_not_a_number", [](SafetensorsFile& f) { f.metadata["tensorgrad.seed"] = "0x10"; },
                     {"metadata 'tensorgrad.seed' is \"0x10\""}),
      bad_checkpoint("load_unknown_own_metadata", [](SafetensorsFile& f) { f.metadata["tensorgrad.epoch"] = "3"; },
                     {"unknown metadata 'tensorgrad.epoch'"}),
      bad_checkpoint("load_nan_param", [](SafetensorsFile& f) { f.tensors["l1.W"].set(1, kNaN); },
                     {"tensor 'l1.W' element 1 is nan", "not finite"}),
      bad_checkpoint("load_inf_moment", [](SafetensorsFile& f) { f.tensors["l1.b.adam.m"].set(0, -kInf); },
                     {"tensor 'l1.b.adam.m' element 0 is -inf"}),
      bad_checkpoint("load_negative_second_moment", [](SafetensorsFile& f) { f.tensors["l1.W.adam.v"].set(0, -1); },
                     {"tensor 'l1.W.adam.v' element 0 is -1", "Adam's second moment is never negative"}),
      on_training<SafetensorsError>(
          "load_checkpoint_of_another_model",
          [](Training& t) {
            Wide wide;
            Training other = compile(
                TrainingSpec<Wide>{.model = wide,
                                   .loss = [](const Wide& m, const Inputs& in) { return mean(m.l1(in.at("x"))); },
                                   .inputs = {{"x", {{4, 3}}}},
                                   .optimizer = {.kind = AdamConfig{}}});
            const std::string path =
                std::filesystem::temp_directory_path() / ("tg_bad_input_wide_" + std::to_string(::getpid()));
            other.save(path);
            try {
              t.load(path);
            } catch (...) {
              std::filesystem::remove(path);
              throw;
            }
            std::filesystem::remove(path);
          },
          {"'l1.W': expected f32[2,1], found f32[3,1]", "'l1.W.adam.m'"}),
  };
}

std::vector<BadInputCase> save_cases() {
  return {
      {.name = "save_into_a_missing_directory",
       .setup =
           [] {
             Trained t;
             return t.with([p = t.dir->file("no/such/dir/ckpt")](Training& tr) { tr.save(p); });
           },
       .expected = throws<SafetensorsError>(),
       .fragments = {"no/such/dir/ckpt", "cannot save"}},
      {.name = "save_to_a_path_naming_no_file",
       .setup =
           [] {
             Trained t;
             return t.with([p = t.dir->path().string() + "/"](Training& tr) { tr.save(p); });
           },
       .expected = throws<SafetensorsError>(),
       .fragments = {"cannot save: the path names no file"}},
      {.name = "save_over_a_directory",
       .setup =
           [] {
             Trained t;
             const std::string target = t.dir->file("taken");
             std::filesystem::create_directory(target);
             return t.with([target](Training& tr) { tr.save(target); });
           },
       .expected = throws<SafetensorsError>(),
       .fragments = {"taken", "cannot save"}},
  };
}

// ---- compile, attach, forward ----

template <class E = CompileError>
BadInputCase bad_compile(std::string name, std::function<void()> call, std::vector<std::string> fragments) {
  return {.name = std::move(name),
          .setup = stateless(std::move(call)),
          .expected = throws<E>(),
          .fragments = std::move(fragments)};
}

void compile_net(std::function<Tensor(const Net&, const Inputs&)> loss, InputSpecs inputs = kInputs) {
  Net net;
  (void)compile(TrainingSpec<Net>{.model = net, .loss = std::move(loss), .inputs = std::move(inputs)});
}

std::vector<BadInputCase> compile_cases() {
  return {
      bad_compile("compile_loss_not_a_scalar",
                  [] { compile_net([](const Net& m, const Inputs& in) { return m.l1(in.at("x")); }); },
                  {"the loss must be a 0-d float tensor (a scalar), got f32[4,1]"}),
      bad_compile("compile_loss_reads_an_undeclared_input",
                  [] { compile_net([](const Net& m, const Inputs& in) { return mean(m.l1(in.at("features"))); }); },
                  {"input 'features' is read but not declared"}),
      bad_compile("compile_without_a_loss", [] { compile_net(nullptr); }, {"compile: no loss function"}),
      bad_compile("compile_wildcard_in_a_training_input",
                  [] {
                    compile_net(net_loss, {{"x", {{-1, 2}}}, {"y", {{4, 1}}}});
                  },
                  {"compile: input 'x' has shape [-1,2]"}),
      bad_compile("compile_input_named_like_a_param",
                  [] {
                    compile_net(net_loss, {{"x", {{4, 2}}}, {"y", {{4, 1}}}, {"l1.W", {{2, 1}}}});
                  },
                  {"compile: input 'l1.W' has the name of a param of the model"}),
      bad_compile("compile_input_named_step_seed",
                  [] {
                    compile_net(net_loss, {{"x", {{4, 2}}}, {"y", {{4, 1}}}, {"step_seed", {{}, DType::i32}}});
                  },
                  {"compile: input 'step_seed' is reserved for the step seed"}),
      bad_compile("compile_input_in_the_optimizer_namespace",
                  [] {
                    compile_net(net_loss, {{"x", {{4, 2}}}, {"y", {{4, 1}}}, {"optim.lr", {{}}}});
                  },
                  {"compile: input 'optim.lr' is in the namespace 'optim.'"}),
      bad_compile("compile_loss_without_params",
                  [] { compile_net([](const Net&, const Inputs& in) { return mean(in.at("x")); }); },
                  {"the loss does not depend on any param of the model"}),
      bad_compile("compile_model_without_params",
                  [] {
                    NoParams none;
                    (void)compile(TrainingSpec<NoParams>{
                        .model = none,
                        .loss = [](const NoParams&, const Inputs& in) { return mean(in.at("x")); },
                        .inputs = kInputs});
                  },
                  {"compile: the model has no params to train"}),
      bad_compile<ShapeError>(
          "compile_loss_with_a_shape_error",
          [] { compile_net([](const Net& m, const Inputs& in) { return mean(m.l1(in.at("y"))); }); },
          {"Linear 'l1'(f32[4,1], f32[2,1], f32[1])", "the input's last axis must have length 2 (in_features)"}),
  };
}

BadInputCase bad_attach(std::string name, ForwardSpec<Net> spec, std::vector<std::string> fragments) {
  return on_training<CompileError>(
      std::move(name), [spec](Training& t) { (void)t.attach(spec); }, std::move(fragments));
}

BadInputCase bad_forward_run(std::string name, TensorMap data, std::string kind, std::vector<std::string> fragments) {
  return {.name = std::move(name),
          .setup =
              [data] {
                Trained t;
                auto f = std::make_shared<Forward>(
                    t.train->attach(ForwardSpec<Net>{.forward = net_forward, .inputs = {{"x", {{-1, 2}}}}}));
                return t.with([f, data](Training&) { throw_if_failed(f->run(data)); });
              },
          .expected = reports(std::move(kind)),
          .fragments = std::move(fragments)};
}

std::vector<BadInputCase> forward_cases() {
  return {
      bad_attach("attach_no_cache", {.forward = net_forward, .inputs = {{"x", {{-1, 2}}}}, .max_cached_shapes = 0},
                 {"attach: max_cached_shapes must be >= 1"}),
      bad_attach("attach_wildcard_off_axis_0", {.forward = net_forward, .inputs = {{"x", {{2, -1}}}}},
                 {"attach: input 'x' has shape [2,-1]"}),
      bad_attach("attach_without_a_function", {.forward = nullptr, .inputs = {{"x", {{-1, 2}}}}},
                 {"attach: no forward function"}),
      bad_forward_run("forward_missing_input", {}, "input", {"run: missing input 'x'"}),
      bad_forward_run("forward_wrong_feature_size", {{"x", f32({3, 3}, std::vector<double>(9, 1))}}, "input",
                      {"input 'x'", "f32[3,3]"}),
      bad_forward_run("forward_unknown_input", {{"x", f32({1, 2}, {1, 2})}, {"y", f32({1, 1}, {1})}}, "input",
                      {"unknown input 'y'"}),
  };
}

std::vector<BadInputCase> training_table() {
  std::vector<BadInputCase> all;
  for (auto part : {step_cases(), param_cases(), load_cases(), save_cases(), compile_cases(), forward_cases()}) {
    for (BadInputCase& c : part) all.push_back(std::move(c));
  }
  return all;
}

TG_BAD_INPUT_SUITE(TrainingApi, training_table);

}  // namespace
}  // namespace tg
