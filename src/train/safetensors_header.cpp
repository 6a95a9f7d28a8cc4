#include "train/safetensors_header.h"

#include <cstdio>
#include <utility>
#include <vector>

#include "tensorgrad/ir/error.h"

namespace tg::safetensors_header {
namespace {

using nlohmann::json;

// nlohmann's messages quote the token read last, which for an unterminated string is the rest of a
// header of up to 100 MB, in whatever bytes the file holds: the message keeps a short, ASCII
// excerpt of it.
constexpr std::size_t kExcerptBytes = 40;

std::string excerpt(std::string_view token) {
  std::string out;
  for (std::size_t i = 0; i < token.size() && i < kExcerptBytes; ++i) {
    const auto c = static_cast<unsigned char>(token[i]);
    if (c >= 0x20 && c < 0x7F) {
      out += token[i];
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      out += escaped;
    }
  }
  if (token.size() > kExcerptBytes) out += "...";
  return out;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Builds the document from nlohmann's SAX events (its own DOM parser keeps the last of duplicate
// keys and has no depth limit), and turns a syntax error into "at byte N: <what>".
class StrictBuilder final : public nlohmann::json_sax<json> {
 public:
  StrictBuilder(std::string_view text, std::size_t max_depth) : text_(text), max_depth_(max_depth) {}

  json take_root() { return std::move(root_); }
  const std::string& problem() const { return problem_; }

  bool null() override { return add(json(nullptr)) != nullptr; }
  bool boolean(bool value) override { return add(json(value)) != nullptr; }
  bool number_integer(number_integer_t value) override { return add(json(value)) != nullptr; }
  bool number_unsigned(number_unsigned_t value) override { return add(json(value)) != nullptr; }
  bool number_float(number_float_t value, const string_t& /*literal*/) override { return add(json(value)) != nullptr; }
  bool string(string_t& value) override { return add(json(std::move(value))) != nullptr; }
  bool binary(binary_t& /*value*/) override {  // only the binary formats (CBOR, ...) produce these
    problem_ = "binary values are not JSON";
    return false;
  }

  bool start_object(std::size_t /*elements*/) override { return open(json::object()); }
  bool start_array(std::size_t /*elements*/) override { return open(json::array()); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }

  bool key(string_t& key) override {
    if (open_.back()->contains(key)) {
      problem_ = "duplicate key " + quote(key);
      return false;
    }
    key_ = std::move(key);
    return true;
  }

  bool parse_error(std::size_t position, const std::string& last_token, const json::exception& error) override {
    // what() is "[json.exception.parse_error.101] parse error at line L, column C: <what>"; the
    // position is the 1-based index of the last byte read, so "at byte N" counts from 0 as the
    // library's other messages do.
    std::string what = error.what();
    if (const std::size_t colon = what.find(": "); colon != std::string::npos) what.erase(0, colon + 2);
    const std::string quoted = "last read: '" + last_token + "'";
    if (const std::size_t at = what.find(quoted); at != std::string::npos) {
      what.replace(at, quoted.size(), "last read: '" + excerpt(last_token) + "'");
    }
    // "02": the lexer reads the number 0, then a second number right after it. Say why.
    const std::size_t token_start = position >= last_token.size() ? position - last_token.size() : 0;
    if (what.find("unexpected number literal") != std::string::npos && token_start >= 1 &&
        token_start <= text_.size() && is_digit(text_[token_start - 1])) {
      what += " (a number may not have leading zeros)";
    }
    problem_ = "at byte " + std::to_string(position > 0 ? position - 1 : 0) + ": " + what;
    return false;
  }

 private:
  // Places `value` where the parse is (the root, the open array's end, or the open object's
  // member named by the last key) and returns where it lies.
  json* add(json&& value) {
    if (open_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    json& parent = *open_.back();
    if (parent.is_array()) {
      parent.push_back(std::move(value));
      return &parent.back();
    }
    return &parent.get_ref<json::object_t&>().emplace(std::move(key_), std::move(value)).first->second;
  }

  bool open(json&& container) {
    if (open_.size() >= max_depth_) {
      problem_ = "nested deeper than " + std::to_string(max_depth_) + " levels";
      return false;
    }
    // Stays valid: nothing is added to a parent while a child is open, and object members are map
    // nodes.
    open_.push_back(add(std::move(container)));
    return true;
  }

  bool close() {
    open_.pop_back();
    return true;
  }

  std::string_view text_;
  std::size_t max_depth_;
  json root_;
  std::vector<json*> open_;  // the open arrays and objects, outermost first
  std::string key_;          // the key of the open object's member being read
  std::string problem_;
};

}  // namespace

nlohmann::json parse(std::string_view text, std::size_t max_depth) {
  StrictBuilder builder(text, max_depth);
  const bool parsed = json::sax_parse(text.data(), text.data() + text.size(), &builder, json::input_format_t::json,
                                      /*strict=*/true);
  if (!parsed) throw Error(builder.problem().empty() ? std::string("the JSON parser stopped") : builder.problem());
  return builder.take_root();
}

std::string quote(std::string_view text) {
  return json(std::string(text)).dump(-1, ' ', false, json::error_handler_t::replace);
}

bool is_valid_utf8(std::string_view text) {
  try {
    (void)json(std::string(text)).dump();  // the strict handler throws on ill-formed UTF-8
    return true;
  } catch (const json::type_error&) {
    return false;
  }
}

}  // namespace tg::safetensors_header
