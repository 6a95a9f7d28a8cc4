// W2 of design.md: a character-level transformer (examples/models.h) trained on a small text shipped
// in the repo (examples/data/text.txt) to predict each next character. Batches are random windows
// of the text drawn with a seeded RNG; AdamW(lr 1e-3, weight decay 0.01). Prints step, loss and
// steps/s as it trains, then continues a window of the text by 200 sampled characters through an
// attached forward (batch 1).
//
//   tg_char_transformer [--steps N] [--backend auto|vulkan|interp_f32|interp_f64] [--small]
//                       [--seed S] [--log-every K] [--generate N] [--temperature T] [--text PATH]
//   (tg_char_transformer --help lists the flags and their defaults)
//
// Full size (design.md): vocab 65, context 128, width 128, 4 layers, 4 heads, batch 32: meant for
// a GPU (interp_f32 on 2 CPU cores: ~4 s a step). --small (width 64, 2 layers, context 64, batch
// 16) is for CPU runs (interp_f32 on 2 cores: ~5 steps/s). Two marks for the loss: ln(65) = 4.17, a uniform guess (a
// model that learned nothing), and the text's unigram entropy (~3, a model that knows only how often each character
// occurs): the run reports the first step below each; below the second the model is using the context. Exits 1 when the
// final loss is not below ln(65).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend_choice.h"
#include "command_line.h"
#include "models.h"
#include "tensorgrad/tensorgrad.h"
#include "tensorgrad/vk/context.h"
#include "tensorgrad/vk/device.h"

#ifndef TG_EXAMPLE_TEXT
#define TG_EXAMPLE_TEXT "examples/data/text.txt"
#endif

namespace {

using tg::examples::BackendChoice;
using tg::examples::CharTransformer;
using tg::examples::choose_backend;
using tg::examples::TransformerConfig;

constexpr std::int64_t kVocab = 65;  // design.md's W2; the text may use fewer characters, not more

struct Options {
  int steps = 200;
  std::string backend = "auto";
  bool small = false;
  std::uint64_t seed = 1;
  int log_every = 10;
  int generate = 200;
  double temperature = 0.8;  // 0: greedy
  std::string text_path = TG_EXAMPLE_TEXT;
};

// The command line (--help lists it); CLI11 refuses unknown flags and bad values with exit != 0.
void add_options(CLI::App& app, Options& o) {
  app.option_defaults()->always_capture_default();
  app.add_option("--steps", o.steps, "training steps")->check(tg::examples::at_least(1, "POSITIVE"));
  tg::examples::add_backend_option(app, o.backend);
  app.add_flag("--small", o.small,
               "width 64, 2 layers, context 64, batch 16, for CPU runs (default: off, the full size)");
  app.add_option("--seed", o.seed, "seed of the init, the batches and the sampling")
      ->check(tg::examples::not_negative());
  app.add_option("--log-every", o.log_every, "print the loss every K steps")
      ->check(tg::examples::at_least(1, "POSITIVE"));
  app.add_option("--generate", o.generate, "characters to sample after training (0: none)")
      ->check(tg::examples::not_negative());
  app.add_option("--temperature", o.temperature, "sampling temperature (0: greedy)")
      ->check(tg::examples::not_negative());
  app.add_option("--text", o.text_path, "the text to train on")->check(CLI::ExistingFile);
}

// The text as token ids: each distinct byte gets an id, in byte order.
struct Corpus {
  std::string alphabet;  // alphabet[id] is the character of token id
  std::vector<std::int32_t> ids;
  double unigram_entropy = 0;  // -sum p log p over the characters' frequencies, in nats
};

Corpus load_corpus(const std::string& path, std::int64_t context) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw tg::Error("cannot open the text " + path);
  const std::string text{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
  Corpus corpus;
  for (const char c : text) {
    if (corpus.alphabet.find(c) == std::string::npos) corpus.alphabet += c;
  }
  std::sort(corpus.alphabet.begin(), corpus.alphabet.end());
  if (static_cast<std::int64_t>(corpus.alphabet.size()) > kVocab) {
    throw tg::Error(path + " uses " + std::to_string(corpus.alphabet.size()) +
                    " distinct characters (bytes); the model's vocabulary holds " + std::to_string(kVocab));
  }
  if (static_cast<std::int64_t>(text.size()) <= context + 1) {
    throw tg::Error(path + " is too short: " + std::to_string(text.size()) + " bytes for windows of " +
                    std::to_string(context + 1));
  }
  corpus.ids.reserve(text.size());
  std::vector<double> counts(corpus.alphabet.size());
  for (const char c : text) {
    corpus.ids.push_back(static_cast<std::int32_t>(corpus.alphabet.find(c)));
    counts[static_cast<std::size_t>(corpus.ids.back())] += 1;
  }
  for (const double n : counts) {
    const double p = n / static_cast<double>(text.size());
    corpus.unigram_entropy -= p * std::log(p);
  }
  return corpus;
}

// `batch` random windows of context + 1 tokens: "tokens" the first context, "targets" the last.
tg::TensorMap random_windows(const Corpus& corpus, std::int64_t batch, std::int64_t context, std::mt19937_64& rng) {
  std::vector<std::int32_t> tokens, targets;
  tokens.reserve(batch * context);
  targets.reserve(batch * context);
  const std::uint64_t starts = corpus.ids.size() - static_cast<std::size_t>(context);
  for (std::int64_t b = 0; b < batch; ++b) {
    const auto window = corpus.ids.begin() + static_cast<std::ptrdiff_t>(rng() % starts);
    tokens.insert(tokens.end(), window, window + context);
    targets.insert(targets.end(), window + 1, window + context + 1);
  }
  return {{"tokens", tg::HostTensor::i32({batch, context}, tokens)},
          {"targets", tg::HostTensor::i32({batch, context}, targets)}};
}

// The next token from the logits of the last position, among the text's characters: the most likely
// one at temperature 0, else a sample from softmax(logits / temperature).
std::int32_t next_token(const std::vector<double>& last_logits, std::size_t alphabet_size, double temperature,
                        std::mt19937_64& rng) {
  const auto first = last_logits.begin(), last = first + static_cast<std::ptrdiff_t>(alphabet_size);
  const auto best = std::max_element(first, last);
  if (temperature == 0) return static_cast<std::int32_t>(best - first);
  std::vector<double> weights;
  for (auto it = first; it != last; ++it) weights.push_back(std::exp((*it - *best) / temperature));
  std::discrete_distribution<std::int32_t> pick(weights.begin(), weights.end());
  return pick(rng);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"W2: a character-level transformer trained on a small text, then continuing it", "tg_char_transformer"};
  Options options;
  add_options(app, options);
  CLI11_PARSE(app, argc, argv);
  try {
    TransformerConfig config{.vocab = kVocab};
    std::int64_t batch = 32;
    if (options.small) {
      config = {.vocab = kVocab, .context = 64, .width = 64, .layers = 2, .heads = 4};
      batch = 16;
    }
    const std::int64_t context = config.context;
    const Corpus corpus = load_corpus(options.text_path, context);
    const BackendChoice choice = choose_backend(options.backend);

    CharTransformer model(config);
    tg::Training training = tg::compile(tg::TrainingSpec<CharTransformer>{
        .model = model,
        .loss = tg::examples::transformer_loss,
        .inputs = {{"tokens", {{batch, context}, tg::DType::i32}}, {"targets", {{batch, context}, tg::DType::i32}}},
        .optimizer = {.kind = tg::AdamWConfig{.weight_decay = 0.01}},
        .lr = 1e-3,
        .backend = choice.backend,
        .seed = options.seed,
        .vk_context = choice.context,
    });
    std::int64_t param_count = 0;
    for (const auto& [name, values] : training.download_params()) {
      param_count += static_cast<std::int64_t>(values.size());
    }
    std::printf(
        "W2 on %s: %lld params (width %lld, %lld layers, %lld heads, context %lld), batch %lld, AdamW lr 1e-3 "
        "wd 0.01\ntext: %s, %zu characters, %zu distinct; step graph of %zu nodes\n",
        tg::backend_name(training.backend()).data(), static_cast<long long>(param_count),
        static_cast<long long>(config.width), static_cast<long long>(config.layers),
        static_cast<long long>(config.heads), static_cast<long long>(context), static_cast<long long>(batch),
        options.text_path.c_str(), corpus.ids.size(), corpus.alphabet.size(), training.graph().nodes().size());

    using Clock = std::chrono::steady_clock;
    const double uniform_loss = std::log(static_cast<double>(kVocab));
    std::mt19937_64 rng(options.seed);
    std::optional<int> below_uniform, below_unigram;
    double loss = 0;
    const auto start = Clock::now();
    auto last_time = start;
    int last_step = 0;
    for (int step = 1; step <= options.steps; ++step) {
      const tg::StepResult r = training.step(random_windows(corpus, batch, context, rng));
      if (!r.ok()) {
        std::fprintf(stderr, "step %d failed (%s): %s\n", step, r.failure().kind.c_str(), r.failure().message.c_str());
        return 1;
      }
      loss = r.loss();
      if (!below_uniform && loss < uniform_loss) below_uniform = step;
      if (!below_unigram && loss < corpus.unigram_entropy) below_unigram = step;
      if (step % options.log_every == 0 || step == options.steps || step == 1) {
        const auto now = Clock::now();
        const double seconds = std::chrono::duration<double>(now - last_time).count();
        std::printf("step %5d  loss %.4f  %7.2f steps/s\n", step, loss, (step - last_step) / seconds);
        std::fflush(stdout);
        last_time = now;
        last_step = step;
      }
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    std::printf("trained %d steps in %.1f s: %.2f steps/s, %.0f tokens/s; final loss %.4f\n", options.steps, seconds,
                options.steps / seconds, static_cast<double>(options.steps * batch * context) / seconds, loss);
    const auto report = [](const char* mark, double value, const std::optional<int>& step) {
      if (step) {
        std::printf("the loss fell below %.3f (%s) at step %d\n", value, mark, *step);
      } else {
        std::printf("the loss never fell below %.3f (%s)\n", value, mark);
      }
    };
    report("ln(65), a uniform guess", uniform_loss, below_uniform);
    report("the text's unigram entropy", corpus.unigram_entropy, below_unigram);

    if (options.generate > 0) {
      // The forward sees exactly `context` tokens (the learned positions are [context, width]): the
      // prompt is a window of the text, and each new character shifts the window by one.
      tg::Forward logits = training.attach(tg::ForwardSpec<CharTransformer>{
          .forward = tg::examples::transformer_logits, .inputs = {{"tokens", {{1, context}, tg::DType::i32}}}});
      const auto prompt_at = static_cast<std::ptrdiff_t>(rng() % (corpus.ids.size() - context));
      std::vector<std::int32_t> window(corpus.ids.begin() + prompt_at, corpus.ids.begin() + prompt_at + context);
      std::string prompt, continuation;
      for (const std::int32_t id : window) prompt += corpus.alphabet[id];
      const auto generate_start = Clock::now();
      for (int i = 0; i < options.generate; ++i) {
        const tg::ForwardResult r = logits.run({{"tokens", tg::HostTensor::i32({1, context}, window)}});
        if (!r.ok()) {
          std::fprintf(stderr, "forward failed (%s): %s\n", r.failure().kind.c_str(), r.failure().message.c_str());
          return 1;
        }
        const std::vector<double> logits_all = r.output().to_f64();
        const auto last_row = logits_all.begin() + (context - 1) * kVocab;
        const std::int32_t id =
            next_token({last_row, last_row + kVocab}, corpus.alphabet.size(), options.temperature, rng);
        continuation += corpus.alphabet[id];
        window.erase(window.begin());
        window.push_back(id);
      }
      std::printf("\nthe prompt (the end of a window of the text):\n----\n%s\n----\n",
                  prompt.substr(prompt.size() - std::min<std::size_t>(prompt.size(), 60)).c_str());
      char how[64] = "greedy";
      if (options.temperature > 0) std::snprintf(how, sizeof how, "sampled at temperature %g", options.temperature);
      std::printf("its continuation, %d characters, %s (%.1f characters/s):\n----\n%s\n----\n", options.generate, how,
                  options.generate / std::chrono::duration<double>(Clock::now() - generate_start).count(),
                  continuation.c_str());
    }
    if (loss >= uniform_loss) {
      std::fprintf(stderr, "char_transformer: the final loss %.4f is not below ln(65): the model did not learn\n",
                   loss);
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "char_transformer: error: %s\n", e.what());
    return 1;
  }
}
