// The text parser's lexical layer (see text_cursor.h).
#include "text_cursor.h"

#include <charconv>
#include <optional>

#include "tensorgrad/ir/error.h"
#include "text_syntax.h"

namespace tg::text {

void TextCursor::fail(std::size_t at, const std::string& message) const {
  std::size_t line = 1, column = 1;
  for (std::size_t i = 0; i < at && i < src_.size(); ++i) {
    if (src_[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  throw ParseError(message, line, column);
}

void TextCursor::skip_space() {
  while (pos_ < src_.size()) {
    const char c = src_[pos_];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++pos_;
    } else if (c == '#' || (c == '/' && pos_ + 1 < src_.size() && src_[pos_ + 1] == '/')) {
      while (pos_ < src_.size() && src_[pos_] != '\n') ++pos_;
    } else {
      break;
    }
  }
}

char TextCursor::peek() {
  skip_space();
  return pos_ < src_.size() ? src_[pos_] : '\0';
}

bool TextCursor::accept(char c) {
  if (peek() != c || pos_ >= src_.size()) return false;
  ++pos_;
  return true;
}

void TextCursor::expect(char c, std::string_view what) {
  if (!accept(c)) fail(pos_, "expected " + std::string(what) + found());
}

std::string TextCursor::found() {
  skip_space();
  if (pos_ >= src_.size()) return ", found the end of the text";
  const char c = src_[pos_];
  if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) return "";
  return ", found '" + std::string(1, c) + "'";
}

bool TextCursor::is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool TextCursor::is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }

// An identifier (op names, keywords, dtypes, attribute names); empty when none starts here.
std::string_view TextCursor::ident() {
  skip_space();
  const std::size_t start = pos_;
  if (pos_ < src_.size() && is_ident_start(src_[pos_])) {
    while (pos_ < src_.size() && is_ident_char(src_[pos_])) ++pos_;
  }
  return src_.substr(start, pos_ - start);
}

bool TextCursor::accept_keyword(std::string_view keyword) {
  const std::size_t start = pos_;
  if (ident() == keyword) return true;
  pos_ = start;
  return false;
}

void TextCursor::expect_keyword(std::string_view keyword, std::string_view why) {
  skip_space();
  if (!accept_keyword(keyword)) fail(pos_, std::string(why) + found());
}

std::string TextCursor::quoted_string() {
  const std::size_t start = pos_;
  ++pos_;  // the opening quote
  std::string out;
  while (true) {
    if (pos_ >= src_.size()) fail(start, "unterminated string");
    const char c = src_[pos_++];
    if (c == '"') return out;
    if (c != '\\') {
      out += c;
      continue;
    }
    if (pos_ >= src_.size()) fail(start, "unterminated string");
    const char escaped = src_[pos_++];
    if (escaped == '"' || escaped == '\\') {
      out += escaped;
    } else if (escaped == 'n') {
      out += '\n';
    } else if (escaped == 't') {
      out += '\t';
    } else if (escaped == 'x' && pos_ + 2 <= src_.size()) {
      unsigned byte = 0;
      auto [end, ec] = std::from_chars(src_.data() + pos_, src_.data() + pos_ + 2, byte, 16);
      if (ec != std::errc() || end != src_.data() + pos_ + 2) fail(pos_ - 2, "bad \\x escape in string");
      out += static_cast<char>(byte);
      pos_ += 2;
    } else {
      fail(pos_ - 2, "unknown escape '\\" + std::string(1, escaped) + "' in string");
    }
  }
}

// A bare name ([A-Za-z0-9_./-]+) or a quoted one.
Name TextCursor::name(std::string_view what) {
  skip_space();
  Name result{.at = pos_};
  if (pos_ < src_.size() && src_[pos_] == '"') {
    result.text = quoted_string();
    result.quoted = true;
    return result;
  }
  while (pos_ < src_.size() && text::is_name_char(src_[pos_])) ++pos_;
  if (pos_ == result.at) fail(pos_, "expected " + std::string(what) + found());
  result.text = std::string(src_.substr(result.at, pos_ - result.at));
  return result;
}

// '%' followed by a name; a bare all-digit name is a node output.
Name TextCursor::value_name(std::string_view what) {
  skip_space();
  const std::size_t at = pos_;
  expect('%', what);
  Name result = name(what);
  result.at = at;
  return result;
}

template <class Int>
Int TextCursor::integer(std::string_view what) {
  skip_space();
  const std::size_t start = pos_;
  if (pos_ < src_.size() && (src_[pos_] == '-' || src_[pos_] == '+')) ++pos_;
  while (pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '9') ++pos_;
  std::string_view digits = src_.substr(start, pos_ - start);
  if (!digits.empty() && digits[0] == '+') digits.remove_prefix(1);
  Int value{};
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) {
    pos_ = start;
    fail(start, "expected " + std::string(what) + found());
  }
  return value;
}

TensorType TextCursor::type() {
  skip_space();
  const std::size_t at = pos_;
  const std::string_view dtype_text = ident();
  if (dtype_text.empty()) fail(at, "expected a type such as f32[2,3]" + found());
  const std::optional<DType> dtype = parse_dtype(dtype_text);
  if (!dtype) fail(at, "unknown dtype '" + std::string(dtype_text) + "' (expected f32, f16, bf16, i32 or bool)");
  TensorType result{*dtype, {}};
  expect('[', "'[' after the dtype");
  std::int64_t elements = 1;
  if (!accept(']')) {
    do {
      skip_space();
      const std::size_t dim_at = pos_;
      const auto dim = integer<std::int64_t>("a dimension");
      if (dim < 0) fail(dim_at, "dimension " + std::to_string(dim) + " is negative");
      // The size limits of shape.h, checked per dim so the error points at the one past them: the
      // extent (a 0 dim counted as 1) stays at most kMaxElements.
      if (dim > 1 && elements > kMaxElements / dim) {
        fail(dim_at, "shape has too many elements: more than " + std::to_string(kMaxElements) +
                         " (2^48), the limit of one tensor, with dimension " + std::to_string(dim));
      }
      if (dim > 1) elements *= dim;
      result.shape.push_back(dim);
    } while (accept(','));
    expect(']', "',' or ']' in the shape");
  }
  return result;
}

SourceLoc TextCursor::location() {
  SourceLoc loc;
  skip_space();
  if (peek() != '"') fail(pos_, "expected a quoted file name after '@'");
  loc.file = quoted_string();
  expect(':', "':' and a line number after the file name");
  loc.line = integer<std::uint32_t>("a line number");
  expect(':', "':' and a column number after the line");
  loc.column = integer<std::uint32_t>("a column number");
  return loc;
}

Literal TextCursor::literal() {
  skip_space();
  Literal lit{.at = pos_};
  const char c = peek();
  if (c == '[') {
    ++pos_;
    std::vector<std::int64_t> ints;
    if (!accept(']')) {
      do {
        ints.push_back(integer<std::int64_t>("an integer in the list"));
      } while (accept(','));
      expect(']', "',' or ']' in the list");
    }
    lit.value = std::move(ints);
    return lit;
  }
  if (c == '"') {
    lit.value = quoted_string();
    return lit;
  }
  if (is_ident_start(c)) {
    const std::string_view word = ident();
    if (word == "true" || word == "false") {
      lit.value = word == "true";
    } else if (word == "inf" || word == "nan") {
      lit.value = real_value(word, lit.at);
    } else if (const std::optional<DType> dtype = parse_dtype(word)) {
      lit.value = *dtype;
    } else {
      fail(lit.at, "unknown attribute value '" + std::string(word) + "'");
    }
    return lit;
  }
  // A number: an integer unless it has a fraction, an exponent, or is inf/nan.
  const std::size_t start = pos_;
  if (pos_ < src_.size() && (src_[pos_] == '-' || src_[pos_] == '+')) ++pos_;
  bool is_real = false;
  if (pos_ < src_.size() && is_ident_start(src_[pos_])) {
    while (pos_ < src_.size() && is_ident_char(src_[pos_])) ++pos_;
    is_real = true;
  } else {
    while (pos_ < src_.size()) {
      const char d = src_[pos_];
      const bool sign_in_exponent =
          (d == '-' || d == '+') && pos_ > start && (src_[pos_ - 1] == 'e' || src_[pos_ - 1] == 'E');
      if (d == '.' || d == 'e' || d == 'E') is_real = true;
      if (!((d >= '0' && d <= '9') || d == '.' || d == 'e' || d == 'E' || sign_in_exponent)) break;
      ++pos_;
    }
  }
  const std::string_view token = src_.substr(start, pos_ - start);
  if (is_real) {
    lit.value = real_value(token, start);
  } else {
    pos_ = start;
    lit.value = integer<std::int64_t>("an attribute value");
  }
  return lit;
}

double TextCursor::real_value(std::string_view token, std::size_t at) {
  std::string_view body = token;
  const bool negative = !body.empty() && body[0] == '-';
  if (!body.empty() && (body[0] == '-' || body[0] == '+')) body.remove_prefix(1);
  double value = 0;
  auto [end, ec] = std::from_chars(body.data(), body.data() + body.size(), value);
  // Well formed but rounding to inf or to 0: say so rather than "malformed".
  if (ec == std::errc::result_out_of_range && end == body.data() + body.size()) {
    fail(at, "number '" + std::string(token) +
                 "' is out of the range of a double (finite magnitudes from 4.9406564584124654e-324 to "
                 "1.7976931348623157e308; write inf for infinity)");
  }
  if (body.empty() || ec != std::errc() || end != body.data() + body.size()) {
    fail(at, "malformed number '" + std::string(token) + "'");
  }
  return negative ? -value : value;
}

template std::int64_t TextCursor::integer<std::int64_t>(std::string_view what);
template std::uint32_t TextCursor::integer<std::uint32_t>(std::string_view what);

}  // namespace tg::text
