#pragma once
// Reading golden files (tests/golden/data/*.golden, format in tests/golden/README.md) and the value
// lines of regression files (tests/golden/regressions/*.graph). Both are line-oriented: a keyword,
// then tokens; a line that starts with whitespace continues the previous one; '#' starts a comment
// line. Every error names file:line.
#include <cstddef>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "support/library.h"

namespace tg::golden {

// Malformed golden or regression text; the message starts with "file:line: ".
class FormatError : public std::runtime_error {
 public:
  FormatError(const std::string& file, std::size_t line, const std::string& what)
      : std::runtime_error(file + ":" + std::to_string(line) + ": " + what) {}
};

// One logical line: its keyword and the tokens after it (continuation lines appended). Tokens are
// words, "quoted strings" (with \" and \\ escapes, kept quoted), [bracketed lists] and '='.
struct Directive {
  std::string keyword;
  std::vector<std::string> tokens;
  std::size_t line = 0;  // where the keyword is
};
// `first_line` numbers the first line of `text` (for a part of a larger file).
std::vector<Directive> read_directives(std::string_view text, const std::string& file, std::size_t first_line = 1);

// A named tensor with its values, as in `input x f32 [2,3] 1.5 -2.0 ...`.
struct NamedTensor {
  std::string name;  // empty for `output` and `proj`
  HostTensor value;
  std::size_t line = 0;
};
// Parses `[name] dtype [shape] values...` from a directive's tokens, starting at `first`, and checks
// the value count and that i32 values are integers in range and bool values 0/1/true/false.
NamedTensor parse_tensor(const Directive& d, std::size_t first, bool named, const std::string& file);
// Parses one attribute value: 3, -1.5, true, [1,2], "mean".
AttrValue parse_attr_value(const std::string& token, const Directive& d, const std::string& file);

struct GoldenCase {
  std::string name;
  std::string call;
  Attrs attrs;
  std::vector<NamedTensor> inputs;  // in the file's order: the call receives them in this order
  NamedTensor output;
  std::optional<NamedTensor> proj;  // present when the file holds gradients
  std::vector<NamedTensor> grads;   // d sum(output * proj) / d input, for f32 inputs
  std::string file;
  std::size_t line = 0;
  std::string where() const { return file + ":" + std::to_string(line); }
};

std::vector<GoldenCase> parse_golden(std::string_view text, const std::string& file);
std::vector<GoldenCase> load_golden_file(const std::filesystem::path& path);
std::string read_text_file(const std::filesystem::path& path);  // throws std::runtime_error naming the path

}  // namespace tg::golden
