#pragma once
// What the examples' command lines share (CLI11): the --backend option and validators whose
// messages read well (CLI11's PositiveNumber and NonNegativeNumber print their bounds as doubles,
// DBL_MAX in full, and 2.1 reads "-1" into an unsigned option as 2^64 - 1).
#include <CLI/CLI.hpp>
#include <charconv>
#include <string>
#include <system_error>

namespace tg::examples {

// Adds --backend (examples/backend_choice.h); CLI11 refuses any other name, listing these.
inline CLI::Option* add_backend_option(CLI::App& app, std::string& backend) {
  return app
      .add_option("--backend", backend,
                  "where to train: auto (Vulkan on the default device when one is usable, else interp_f32), "
                  "vulkan (an error without a device), interp_f32 or interp_f64 (the CPU interpreter)")
      ->check(CLI::IsMember({"auto", "vulkan", "interp_f32", "interp_f64"}));
}

// An integer option's lower bound; `name` is what --help shows after the type (INT:<name>).
inline CLI::Validator at_least(int min, const std::string& name) {
  return CLI::Validator(
      [min](std::string& text) -> std::string {
        int value = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (error != std::errc{} || end != text.data() + text.size()) return {};  // CLI11's conversion refuses it
        return value < min ? "must be at least " + std::to_string(min) + ", got " + text : std::string{};
      },
      name);
}

// A number option that may not be negative (an unsigned one included).
inline CLI::Validator not_negative() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        return text.starts_with('-') ? "must not be negative, got " + text : std::string{};
      },
      "NONNEGATIVE");
}

}  // namespace tg::examples
