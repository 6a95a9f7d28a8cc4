#pragma once
// Element types of IR values. f64 never appears in a graph: it exists only inside the oracle.
//
// f16 (IEEE binary16) and bf16 (bfloat16) are storage formats: every value of such a dtype is
// rounded to nearest even when it is stored, and kernels compute in (at least) f32 between loads
// and stores. docs/dtypes.md describes the semantics each backend implements.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tg {

// New dtypes go at the end: nothing stores these values (the text format and safetensors use
// names), but appending keeps every existing switch's order.
enum class DType : std::uint8_t { f32, i32, boolean, f16, bf16 };

std::string_view dtype_name(DType dtype);  // "f32", "i32", "bool", "f16", "bf16"
std::optional<DType> parse_dtype(std::string_view text);
// The float dtypes: f32, f16 and bf16.
inline bool is_float(DType dtype) { return dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16; }
// The 16-bit float storage formats.
inline bool is_low_precision(DType dtype) { return dtype == DType::f16 || dtype == DType::bf16; }
// Bytes of one element in the dtype's own storage (bool: 1).
std::size_t dtype_bytes(DType dtype);
// The unit roundoff of a float dtype, half its machine epsilon: 2^-24 (f32), 2^-11 (f16), 2^-8
// (bf16). 0 for i32 and bool, whose values are exact.
double unit_roundoff(DType dtype);

}  // namespace tg
