#pragma once
// A small strict JSON (RFC 8259) reader and string quoter, enough for safetensors headers. Internal
// to src/train. Strict on purpose: the input may be a corrupt or hostile file, so the reader
// checks UTF-8, refuses duplicate object keys and lone surrogates, and caps the nesting depth so
// that "[[[[..." cannot overflow the stack.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tg::json {

struct Member;

struct Value {
  enum class Kind : std::uint8_t { null, boolean, number, string, array, object };
  Kind kind = Kind::null;
  bool boolean = false;
  // A string's decoded contents, or a number's literal text as written.
  std::string text;
  // A number written as a plain non-negative integer ("0", "42") that fits in 64 bits; empty for
  // "-1", "1.0", "1e3" or anything larger, which callers that need a count or offset refuse.
  std::optional<std::uint64_t> unsigned_integer;
  std::vector<Value> items;     // array elements
  std::vector<Member> members;  // object members in file order; keys are unique

  const Value* find(std::string_view key) const;  // the object member named `key`, or null
};

struct Member {
  std::string key;
  Value value;
};

std::string_view kind_name(Value::Kind kind);  // "null", "boolean", "number", ...

// Parses one JSON value; whitespace may surround it, nothing else may follow. Throws tg::Error
// "at byte N: <what is wrong>" (N counted from the start of `text`).
Value parse(std::string_view text, std::size_t max_depth = 64);

// `text` as a JSON string literal, quotes included. `text` must be valid UTF-8 (checked by the
// caller with is_valid_utf8); non-ASCII characters are written as they are.
std::string quote(std::string_view text);

bool is_valid_utf8(std::string_view text);

}  // namespace tg::json
