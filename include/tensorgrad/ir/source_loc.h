#pragma once
// Where the user created a node. std::source_location cannot be built for a graph read back from
// text, so the IR keeps a copy of its fields; from() takes one from the user's call site.
#include <cstdint>
#include <source_location>
#include <string>

namespace tg {

struct SourceLoc {
  std::string file;
  std::uint32_t line = 0;
  std::uint32_t column = 0;

  static SourceLoc from(const std::source_location& loc);
  bool known() const { return !file.empty(); }
  std::string to_string() const;  // "file:line" or "<unknown>"
  friend bool operator==(const SourceLoc&, const SourceLoc&) = default;
};

}  // namespace tg
