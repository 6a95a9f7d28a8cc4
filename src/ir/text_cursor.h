#pragma once
// The lexical layer of the text parser: a cursor over the text that skips spaces and comments,
// reads names, numbers, strings, types, call sites and attribute literals, and turns every
// refusal into a ParseError at the offending token's line and column. Internal to src/ir.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tensorgrad/ir/attrs.h"
#include "tensorgrad/ir/shape.h"
#include "tensorgrad/ir/source_loc.h"

namespace tg::text {

struct Name {
  std::string text;
  bool quoted = false;
  std::size_t at = 0;  // offset of the token (of the '%' for value names)
};

// An attribute value as written; its kind is settled against the op's schema (1 -> 1.0 for reals).
struct Literal {
  AttrValue value;
  std::size_t at = 0;
};

class TextCursor {
 public:
  explicit TextCursor(std::string_view src) : src_(src) {}

  std::size_t position() const { return pos_; }
  // Throws ParseError at the 1-based line and column of offset `at`.
  [[noreturn]] void fail(std::size_t at, const std::string& message) const;

 protected:
  void skip_space();  // whitespace and comments ('#' or '//' to the end of the line)
  char peek();        // next character after spaces, '\0' at the end
  bool accept(char c);
  void expect(char c, std::string_view what);
  std::string found();       // ", found 'x'" for messages
  std::string_view ident();  // [A-Za-z_][A-Za-z0-9_]*, empty when none starts here
  bool accept_keyword(std::string_view keyword);
  void expect_keyword(std::string_view keyword, std::string_view why);
  std::string quoted_string();
  Name name(std::string_view what);        // a bare name ([A-Za-z0-9_./-]+) or a quoted one
  Name value_name(std::string_view what);  // '%' and a name; bare digits mean a node output
  template <class Int>
  Int integer(std::string_view what);  // instantiated for int64 and uint32
  TensorType type();                   // f32[2,3]
  SourceLoc location();                // "file":line:column, after the '@'
  Literal literal();                   // an attribute value
  double real_value(std::string_view token, std::size_t at);

  static bool is_ident_start(char c);
  static bool is_ident_char(char c);

  std::string_view src_;
  std::size_t pos_ = 0;
};

}  // namespace tg::text
