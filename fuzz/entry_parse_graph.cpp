// fuzz_parse_graph: the text parser and the verifier on arbitrary bytes, and the printer on
// whatever the parser accepts (fuzz_entry.h).
#include <string>
#include <string_view>

#include "fuzz_entry.h"
#include "graph_equal.h"
#include "tensorgrad/ir/error.h"
#include "tensorgrad/ir/text.h"
#include "tensorgrad/ir/verifier.h"

namespace tg::fuzz {

int fuzz_parse_graph(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Graph graph;
  try {
    graph = parse_graph(text);
  } catch (const Error&) {
    return 0;  // refused with a typed error: what the parser promises for bad text
  }
  // From here on the graph was accepted, so every step must succeed: a tg::Error is a bug too.
  try {
    verify(graph);
  } catch (const Error& e) {
    throw FuzzBug(std::string("parse_graph accepted a graph that verify() refuses: ") + e.what());
  }
  const std::string printed = print_graph(graph);
  Graph reparsed;
  try {
    reparsed = parse_graph(printed);
  } catch (const Error& e) {
    throw FuzzBug(std::string("the printed form of a parsed graph does not parse: ") + e.what() + "\nprinted text:\n" +
                  printed);
  }
  if (!same_graph(reparsed, graph)) {
    throw FuzzBug("print -> parse changed the graph; printed text:\n" + printed + "\nprinted again:\n" +
                  print_graph(reparsed));
  }
  if (print_graph(reparsed) != printed) throw FuzzBug("printing the reparsed graph gave other text:\n" + printed);
  (void)print_graph(graph, PrintOptions{.locations = false});
  (void)to_dot(graph);
  return 0;
}

}  // namespace tg::fuzz
