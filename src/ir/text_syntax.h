#pragma once
// Lexical rules the text printer, parser and DOT export share: which names print bare, how quoted
// strings escape. Internal to src/ir.
#include <string>
#include <string_view>

#include "tensorgrad/ir/source_loc.h"

namespace tg::text {

// Characters of a bare name: dotted param names (layers.0.attn.q.W), paths and dashes.
inline bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '/' || c == '-';
}

inline bool is_all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// A name prints bare when it is non-empty, made of name characters and not all digits (a bare
// all-digit %N always means node N's output); every other name prints quoted.
inline bool is_bare_name(std::string_view s) {
  if (s.empty() || is_all_digits(s)) return false;
  for (char c : s)
    if (!is_name_char(c)) return false;
  return true;
}

// "..." with '"' and '\' escaped by a backslash and control bytes as \xHH, so any byte string
// survives a round trip.
inline std::string quote(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (char c : s) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte == 0x7f) {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

inline std::string name_text(std::string_view s) { return is_bare_name(s) ? std::string(s) : quote(s); }

// "file:line:column", "<unknown>" when the location is empty (for messages, not the text format).
inline std::string location_text(const SourceLoc& loc) {
  if (loc == SourceLoc{}) return "<unknown>";
  return loc.file + ":" + std::to_string(loc.line) + ":" + std::to_string(loc.column);
}

}  // namespace tg::text
