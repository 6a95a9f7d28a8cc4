#include "train/json.h"

#include <limits>
#include <unordered_set>

#include "tensorgrad/ir/error.h"

namespace tg::json {

const Value* Value::find(std::string_view key) const {
  for (const Member& m : members) {
    if (m.key == key) return &m.value;
  }
  return nullptr;
}

std::string_view kind_name(Value::Kind kind) {
  switch (kind) {
    case Value::Kind::null:
      return "null";
    case Value::Kind::boolean:
      return "boolean";
    case Value::Kind::number:
      return "number";
    case Value::Kind::string:
      return "string";
    case Value::Kind::array:
      return "array";
    case Value::Kind::object:
      return "object";
  }
  return "?";
}

namespace {

// Length of the UTF-8 sequence starting at text[at] if it is well formed (shortest form, no
// surrogates, at most U+10FFFF), else 0.
std::size_t utf8_sequence_length(std::string_view text, std::size_t at) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(at);
  if (lead < 0x80) return 1;
  std::size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // allowed range of the first continuation byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;   // overlong
    if (lead == 0xED) high = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;   // overlong
    if (lead == 0xF4) high = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (at + length > text.size()) return 0;
  if (byte(at + 1) < low || byte(at + 1) > high) return 0;
  for (std::size_t i = 2; i < length; ++i) {
    if (byte(at + i) < 0x80 || byte(at + i) > 0xBF) return 0;
  }
  return length;
}

void append_utf8(std::string& out, std::uint32_t code_point) {
  if (code_point < 0x80) {
    out += static_cast<char>(code_point);
  } else if (code_point < 0x800) {
    out += static_cast<char>(0xC0 | (code_point >> 6));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else if (code_point < 0x10000) {
    out += static_cast<char>(0xE0 | (code_point >> 12));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (code_point >> 18));
    out += static_cast<char>(0x80 | ((code_point >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((code_point >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (code_point & 0x3F));
  }
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Parser {
 public:
  Parser(std::string_view text, std::size_t max_depth) : text_(text), max_depth_(max_depth) {}

  Value parse_document() {
    skip_space();
    Value v = parse_value(0);
    skip_space();
    if (pos_ != text_.size()) fail(pos_, "unexpected text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void fail(std::size_t at, const std::string& what) const {
    throw Error("at byte " + std::to_string(at) + ": " + what);
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }

  void skip_space() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) ++pos_;
  }

  void expect(char c) {
    if (peek() != c || at_end()) {
      fail(pos_, at_end() ? std::string("expected '") + c + "', found the end of the text"
                          : std::string("expected '") + c + "'");
    }
    ++pos_;
  }

  Value parse_value(std::size_t depth) {
    if (at_end()) fail(pos_, "expected a value, found the end of the text");
    const char c = peek();
    if (c == '{' || c == '[') {
      if (depth >= max_depth_) fail(pos_, "nested deeper than " + std::to_string(max_depth_) + " levels");
      return c == '{' ? parse_object(depth + 1) : parse_array(depth + 1);
    }
    if (c == '"') {
      Value v;
      v.kind = Value::Kind::string;
      v.text = parse_string();
      return v;
    }
    if (c == '-' || is_digit(c)) return parse_number();
    if (accept_word("true")) return boolean(true);
    if (accept_word("false")) return boolean(false);
    if (accept_word("null")) return Value{};
    fail(pos_, "expected a value");
  }

  static Value boolean(bool b) {
    Value v;
    v.kind = Value::Kind::boolean;
    v.boolean = b;
    return v;
  }

  bool accept_word(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  Value parse_object(std::size_t depth) {
    Value v;
    v.kind = Value::Kind::object;
    expect('{');
    skip_space();
    if (peek() == '}' && !at_end()) {
      ++pos_;
      return v;
    }
    std::unordered_set<std::string> keys;
    while (true) {
      skip_space();
      const std::size_t key_at = pos_;
      if (peek() != '"' || at_end()) fail(pos_, "expected a string key");
      std::string key = parse_string();
      if (!keys.insert(key).second) fail(key_at, "duplicate key " + quote(key));
      skip_space();
      expect(':');
      skip_space();
      Value member = parse_value(depth);
      v.members.push_back(Member{std::move(key), std::move(member)});
      skip_space();
      if (peek() == ',' && !at_end()) {
        ++pos_;
        continue;
      }
      expect('}');
      return v;
    }
  }

  Value parse_array(std::size_t depth) {
    Value v;
    v.kind = Value::Kind::array;
    expect('[');
    skip_space();
    if (peek() == ']' && !at_end()) {
      ++pos_;
      return v;
    }
    while (true) {
      skip_space();
      v.items.push_back(parse_value(depth));
      skip_space();
      if (peek() == ',' && !at_end()) {
        ++pos_;
        continue;
      }
      expect(']');
      return v;
    }
  }

  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  Value parse_number() {
    const std::size_t start = pos_;
    const bool negative = peek() == '-';
    if (negative) ++pos_;
    if (!is_digit(peek())) fail(pos_, "expected a digit");
    const bool leading_zero = peek() == '0';
    std::optional<std::uint64_t> integer = 0;
    while (is_digit(peek())) {
      const auto digit = static_cast<std::uint64_t>(peek() - '0');
      if (integer && *integer > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) integer.reset();
      if (integer) integer = *integer * 10 + digit;
      ++pos_;
      if (leading_zero) break;
    }
    if (leading_zero && is_digit(peek())) fail(pos_, "a number may not have leading zeros");
    bool plain = !negative;
    if (peek() == '.') {
      plain = false;
      ++pos_;
      if (!is_digit(peek())) fail(pos_, "expected a digit after '.'");
      while (is_digit(peek())) ++pos_;
    }
    if (peek() == 'e' || peek() == 'E') {
      plain = false;
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (!is_digit(peek())) fail(pos_, "expected a digit in the exponent");
      while (is_digit(peek())) ++pos_;
    }
    Value v;
    v.kind = Value::Kind::number;
    v.text = std::string(text_.substr(start, pos_ - start));
    if (plain) v.unsigned_integer = integer;
    return v;
  }

  std::uint32_t parse_hex4() {
    if (pos_ + 4 > text_.size()) fail(pos_, "expected 4 hex digits after \\u");
    std::uint32_t code = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_];
      std::uint32_t digit = 0;
      if (c >= '0' && c <= '9') {
        digit = static_cast<std::uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        digit = static_cast<std::uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        digit = static_cast<std::uint32_t>(c - 'A' + 10);
      } else {
        fail(pos_, "expected a hex digit after \\u");
      }
      code = code * 16 + digit;
      ++pos_;
    }
    return code;
  }

  std::string parse_string() {
    expect('"');
    std::string out;
    while (true) {
      if (at_end()) fail(pos_, "unterminated string");
      const auto c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) fail(pos_, "control character in a string");
      if (c >= 0x80) {
        const std::size_t length = utf8_sequence_length(text_, pos_);
        if (length == 0) fail(pos_, "invalid UTF-8");
        out.append(text_.substr(pos_, length));
        pos_ += length;
        continue;
      }
      ++pos_;
      if (c != '\\') {
        out += static_cast<char>(c);
        continue;
      }
      parse_escape(out);
    }
  }

  void parse_escape(std::string& out) {
    if (at_end()) fail(pos_, "unterminated string");
    const std::size_t escape_at = pos_ - 1;
    const char e = text_[pos_++];
    switch (e) {
      case '"':
      case '\\':
      case '/':
        out += e;
        return;
      case 'b':
        out += '\b';
        return;
      case 'f':
        out += '\f';
        return;
      case 'n':
        out += '\n';
        return;
      case 'r':
        out += '\r';
        return;
      case 't':
        out += '\t';
        return;
      case 'u':
        break;
      default:
        fail(escape_at, "unknown escape \\" + std::string(1, e));
    }
    std::uint32_t code = parse_hex4();
    if (code >= 0xDC00 && code <= 0xDFFF) fail(escape_at, "lone low surrogate");
    if (code >= 0xD800 && code <= 0xDBFF) {
      if (text_.substr(pos_, 2) != "\\u") fail(escape_at, "high surrogate without a low surrogate");
      pos_ += 2;
      const std::uint32_t low = parse_hex4();
      if (low < 0xDC00 || low > 0xDFFF) fail(escape_at, "high surrogate without a low surrogate");
      code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
    }
    append_utf8(out, code);
  }

  std::string_view text_;
  std::size_t max_depth_;
  std::size_t pos_ = 0;
};

}  // namespace

Value parse(std::string_view text, std::size_t max_depth) { return Parser(text, max_depth).parse_document(); }

std::string quote(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20) {
      out += "\\u00";
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    } else {
      out += ch;
    }
  }
  out += '"';
  return out;
}

bool is_valid_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t length = utf8_sequence_length(text, i);
    if (length == 0) return false;
    i += length;
  }
  return true;
}

}  // namespace tg::json
