#pragma once
// OpId, for headers that name ops without needing any op's constant. The constants, tg::op::<Id>,
// are generated from ops.def at build time, one header per family
// (tensorgrad/ir/ops/ids/<family>.h; tensorgrad/ir/ops/ids.h includes them all). A file includes
// only the families it names, so adding an op recompiles only what names its family
// (docs/adding-an-op.md, "The fast loop").
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace tg {

// An op: (family index << 7) | index within its family, both in ops.def order. The values are not
// dense and nothing stores them (the text format uses names); walk the ops with all_ops().
enum class OpId : std::uint16_t {};

// Every op's value is below this (at most 32 families of at most 128 ops, which the generator
// checks), so a table indexed by OpId is an array of this size.
inline constexpr std::size_t kOpIdSpace = std::size_t{32} << 7;

// The registry's view of an OpId. A value no op has is not an error here: op_name gives
// "<invalid op>" and op_family "", so messages about a corrupt node still print.
bool is_registered_op(OpId id);
std::string_view op_name(OpId id);
std::string_view op_family(OpId id);
// Every op, and every family name, in ops.def order.
std::span<const OpId> all_ops();
std::span<const std::string_view> op_families();

}  // namespace tg
