#pragma once
// The JSON side of safetensors (internal to src/train): a strict reader for the header, built on
// nlohmann-json's SAX parser, and the checks the writer needs. The input may be a corrupt or hostile
// file, so on top of what nlohmann checks (RFC 8259 syntax, UTF-8, surrogate pairs) the reader
// refuses duplicate object keys (safetensors forbids them; nlohmann's own parser would keep the
// last) and caps the nesting depth.
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace tg::safetensors_header {

// Parses one JSON value; whitespace may surround it, nothing else may follow. Throws tg::Error
// whose message says what is wrong and, for a syntax error, "at byte N" (counted from 0 at the start
// of `text`); an excerpt of the offending text is shortened and its non-ASCII bytes escaped.
nlohmann::json parse(std::string_view text, std::size_t max_depth = 64);

// `text` as a JSON string literal, quotes included, for messages (invalid UTF-8 is replaced, never
// thrown on).
std::string quote(std::string_view text);

// Whether `text` is well-formed UTF-8 (RFC 3629: no overlong forms, surrogates or code points past
// U+10FFFF), i.e. whether the writer can put it in a header.
bool is_valid_utf8(std::string_view text);

}  // namespace tg::safetensors_header
