#pragma once
// Element types of IR values. f64 never appears in a graph: it exists only inside the oracle.
#include <cstdint>
#include <optional>
#include <string_view>

namespace tg {

enum class DType : std::uint8_t { f32, i32, boolean };

std::string_view dtype_name(DType dtype);  // "f32", "i32", "bool"
std::optional<DType> parse_dtype(std::string_view text);
inline bool is_float(DType dtype) { return dtype == DType::f32; }

}  // namespace tg
