#include "golden_file.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

namespace tg::golden {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// Splits one physical line into tokens: words, '=', "quoted strings" and [bracketed lists].
std::vector<std::string> tokenize(std::string_view line, const std::string& file, std::size_t line_no) {
  std::vector<std::string> tokens;
  std::size_t i = 0;
  while (i < line.size()) {
    if (is_space(line[i])) {
      ++i;
      continue;
    }
    const std::size_t start = i;
    if (line[i] == '=') {
      ++i;
    } else if (line[i] == '"') {
      for (++i; i < line.size() && line[i] != '"'; ++i) {
        if (line[i] == '\\') ++i;  // skips the escaped character
      }
      if (i >= line.size()) throw FormatError(file, line_no, "unterminated string");
      ++i;
    } else if (line[i] == '[') {
      i = line.find(']', i);
      if (i == std::string_view::npos) throw FormatError(file, line_no, "'[' without a closing ']'");
      ++i;
    } else {
      while (i < line.size() && !is_space(line[i]) && line[i] != '=') ++i;
    }
    tokens.emplace_back(line.substr(start, i - start));
  }
  return tokens;
}

std::optional<double> parse_double(std::string_view s) {
  double v = 0;
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::optional<std::int64_t> parse_int(std::string_view s) {
  std::int64_t v = 0;
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

std::vector<std::int64_t> parse_int_list(const std::string& token, const Directive& d, const std::string& file) {
  if (token.size() < 2 || token.front() != '[' || token.back() != ']') {
    throw FormatError(file, d.line, "expected a list like [2,3], got '" + token + "'");
  }
  std::vector<std::int64_t> out;
  std::string_view body(token.data() + 1, token.size() - 2);
  std::size_t pos = 0;
  const bool blank = body.find_first_not_of(" \t") == std::string_view::npos;
  while (!blank && pos <= body.size()) {
    const std::size_t comma = std::min(body.find(',', pos), body.size());
    std::string_view item = body.substr(pos, comma - pos);
    while (!item.empty() && is_space(item.front())) item.remove_prefix(1);
    while (!item.empty() && is_space(item.back())) item.remove_suffix(1);
    const auto v = parse_int(item);
    if (!v) throw FormatError(file, d.line, "'" + std::string(item) + "' in " + token + " is not an integer");
    out.push_back(*v);
    pos = comma + 1;
  }
  return out;
}

std::string unquote(const std::string& token) {
  std::string out;
  for (std::size_t i = 1; i + 1 < token.size(); ++i) {
    if (token[i] == '\\' && i + 2 < token.size()) ++i;
    out += token[i];
  }
  return out;
}

double parse_element(const std::string& token, DType dtype, const Directive& d, const std::string& file) {
  if (dtype == DType::boolean) {
    if (token == "1" || token == "true") return 1;
    if (token == "0" || token == "false") return 0;
    throw FormatError(file, d.line, "bool value '" + token + "' is not 0, 1, true or false");
  }
  if (dtype == DType::i32) {
    const auto v = parse_int(token);
    if (!v || *v < std::numeric_limits<std::int32_t>::min() || *v > std::numeric_limits<std::int32_t>::max()) {
      throw FormatError(file, d.line, "i32 value '" + token + "' is not an integer in the i32 range");
    }
    return static_cast<double>(*v);
  }
  const auto v = parse_double(token);
  if (!v) throw FormatError(file, d.line, "f32 value '" + token + "' is not a number");
  return *v;
}

void require_tokens(const Directive& d, std::size_t n, const std::string& form, const std::string& file) {
  if (d.tokens.size() != n) throw FormatError(file, d.line, "expected `" + form + "`");
}

// Case-level consistency: one call and output, grads only for f32 inputs of the same shape, a
// projection shaped like the output whenever there are grads.
void finish_case(const GoldenCase& c, bool has_call, bool has_output, const std::string& file) {
  const auto fail = [&](const std::string& what) { throw FormatError(file, c.line, "case " + c.name + ": " + what); };
  if (!has_call) fail("no `call` line");
  if (!has_output) fail("no `output` line");
  if (!c.grads.empty() && !c.proj) fail("`grad` lines need a `proj` line");
  if (c.proj && c.proj->value.type != TensorType{DType::f32, c.output.value.type.shape}) {
    fail("proj is " + c.proj->value.type.to_string() + " but the output is " + c.output.value.type.to_string());
  }
  std::set<std::string> seen;
  for (const auto& g : c.grads) {
    if (!seen.insert(g.name).second) fail("two `grad " + g.name + "` lines");
    const NamedTensor* input = nullptr;
    for (const auto& in : c.inputs) input = in.name == g.name ? &in : input;
    if (!input) fail("grad of '" + g.name + "', which is not an input");
    if (input->value.type.dtype != DType::f32 || g.value.type != input->value.type) {
      fail("grad " + g.name + " is " + g.value.type.to_string() + " for input " + input->value.type.to_string());
    }
  }
}

}  // namespace

std::vector<Directive> read_directives(std::string_view text, const std::string& file, std::size_t first_line) {
  std::vector<Directive> out;
  std::size_t line_no = first_line;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t end = std::min(text.find('\n', pos), text.size());
    const std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    const std::size_t first = line.find_first_not_of(" \t\r");
    if (first != std::string_view::npos && line[first] != '#') {
      auto tokens = tokenize(line, file, line_no);
      if (first > 0) {  // a continuation line
        if (out.empty()) throw FormatError(file, line_no, "an indented line continues nothing");
        auto& prev = out.back().tokens;
        prev.insert(prev.end(), tokens.begin(), tokens.end());
      } else {
        Directive d{std::move(tokens.front()), {}, line_no};
        d.tokens.assign(tokens.begin() + 1, tokens.end());
        out.push_back(std::move(d));
      }
    }
    ++line_no;
  }
  return out;
}

NamedTensor parse_tensor(const Directive& d, std::size_t first, bool named, const std::string& file) {
  const std::string form = d.keyword + (named ? " NAME" : "") + " DTYPE [SHAPE] VALUES...";
  if (d.tokens.size() < first + (named ? 3 : 2)) throw FormatError(file, d.line, "expected `" + form + "`");
  NamedTensor t;
  t.line = d.line;
  std::size_t i = first;
  if (named) t.name = d.tokens[i++];
  const auto dtype = parse_dtype(d.tokens[i]);
  if (!dtype) throw FormatError(file, d.line, "unknown dtype '" + d.tokens[i] + "' (f32, i32 or bool)");
  ++i;
  Shape shape = parse_int_list(d.tokens[i++], d, file);
  for (auto dim : shape) {
    if (dim < 0) throw FormatError(file, d.line, "shape " + shape_to_string(shape) + " has a negative dimension");
  }
  const auto count = static_cast<std::size_t>(num_elements(shape));
  if (d.tokens.size() - i != count) {
    throw FormatError(file, d.line,
                      (t.name.empty() ? d.keyword : d.keyword + " " + t.name) + " " + std::string(dtype_name(*dtype)) +
                          shape_to_string(shape) + " needs " + std::to_string(count) + " values, got " +
                          std::to_string(d.tokens.size() - i));
  }
  std::vector<double> values;
  values.reserve(count);
  for (; i < d.tokens.size(); ++i) values.push_back(parse_element(d.tokens[i], *dtype, d, file));
  t.value = HostTensor::of(TensorType{*dtype, std::move(shape)}, std::move(values));
  return t;
}

AttrValue parse_attr_value(const std::string& token, const Directive& d, const std::string& file) {
  if (token.empty()) throw FormatError(file, d.line, "empty attribute value");
  if (token.front() == '"') return unquote(token);
  if (token.front() == '[') return parse_int_list(token, d, file);
  if (token == "true") return true;
  if (token == "false") return false;
  if (const auto i = parse_int(token)) return *i;
  if (const auto r = parse_double(token)) return *r;
  throw FormatError(file, d.line, "attribute value '" + token + "' is not an integer, real, boolean, list or string");
}

std::vector<GoldenCase> parse_golden(std::string_view text, const std::string& file) {
  std::vector<GoldenCase> cases;
  std::optional<GoldenCase> open;
  bool has_call = false;
  bool has_output = false;
  std::set<std::string> input_names;
  for (const Directive& d : read_directives(text, file)) {
    const auto& k = d.keyword;
    if (k == "case") {
      if (open) throw FormatError(file, d.line, "`case` inside case " + open->name + " (missing `end`)");
      require_tokens(d, 1, "case NAME", file);
      open = GoldenCase{.name = d.tokens[0], .file = file, .line = d.line};
      has_call = has_output = false;
      input_names.clear();
      continue;
    }
    if (!open) throw FormatError(file, d.line, "`" + k + "` outside a case (expected `case NAME`)");
    GoldenCase& c = *open;
    if (k == "call") {
      require_tokens(d, 1, "call NAME", file);
      if (has_call) throw FormatError(file, d.line, "a second `call` line");
      c.call = d.tokens[0];
      has_call = true;
    } else if (k == "attr") {
      if (d.tokens.size() != 3 || d.tokens[1] != "=") throw FormatError(file, d.line, "expected `attr NAME = VALUE`");
      if (c.attrs.has(d.tokens[0])) throw FormatError(file, d.line, "attribute '" + d.tokens[0] + "' given twice");
      c.attrs.set(d.tokens[0], parse_attr_value(d.tokens[2], d, file));
    } else if (k == "input") {
      if (has_output) throw FormatError(file, d.line, "`input` after `output`");
      NamedTensor t = parse_tensor(d, 0, true, file);
      if (!input_names.insert(t.name).second) throw FormatError(file, d.line, "input '" + t.name + "' given twice");
      c.inputs.push_back(std::move(t));
    } else if (k == "output") {
      if (has_output) throw FormatError(file, d.line, "a second `output` line");
      c.output = parse_tensor(d, 0, false, file);
      has_output = true;
    } else if (k == "proj") {
      if (c.proj) throw FormatError(file, d.line, "a second `proj` line");
      c.proj = parse_tensor(d, 0, false, file);
    } else if (k == "grad") {
      c.grads.push_back(parse_tensor(d, 0, true, file));
    } else if (k == "end") {
      require_tokens(d, 0, "end", file);
      finish_case(c, has_call, has_output, file);
      cases.push_back(std::move(c));
      open.reset();
    } else {
      throw FormatError(file, d.line, "unknown keyword '" + k + "'");
    }
  }
  if (open) throw FormatError(file, open->line, "case " + open->name + " has no `end`");
  return cases;
}

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<GoldenCase> load_golden_file(const std::filesystem::path& path) {
  return parse_golden(read_text_file(path), path.filename().string());
}

}  // namespace tg::golden
