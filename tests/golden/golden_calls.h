#pragma once
// The functions golden cases call. A golden case names a front-end function ("conv2d",
// "layer_norm", ...), its attributes and its inputs; the runner traces that call through the table
// below, so composites are checked as users call them. Each family registers its calls in
// calls_<family>.cpp; a table entry receives the inputs in the case's order.
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "support/library.h"

namespace tg::golden {

using GoldenCall = std::function<Tensor(const std::vector<Tensor>& inputs, const Attrs& attrs)>;
using CallTable = std::map<std::string, GoldenCall, std::less<>>;

void register_core_calls(CallTable& table);  // the ops of the oracle-core issue
void register_structure_calls(CallTable& table);
void register_indexing_calls(CallTable& table);
void register_losses_calls(CallTable& table);
void register_image_calls(CallTable& table);
void register_random_calls(CallTable& table);
void register_normalization_calls(CallTable& table);

const CallTable& call_table();  // all of the above

// Attribute helpers for table entries (defined in call_table.cpp). Golden files write 2 for an
// integer and 2.0 for a real; number() takes either. dtypes are strings: "f32", "i32", "bool".
double number(const Attrs& attrs, std::string_view name);
std::optional<double> optional_number(const Attrs& attrs, std::string_view name);
std::optional<std::int64_t> optional_integer(const Attrs& attrs, std::string_view name);
bool boolean_or(const Attrs& attrs, std::string_view name, bool fallback);
DType dtype_or(const Attrs& attrs, std::string_view name, DType fallback);
// Throws tg::Error naming the call unless there are exactly `count` inputs.
void require_inputs(const std::vector<Tensor>& inputs, std::size_t count, std::string_view call);

}  // namespace tg::golden
