// Every check of the safetensors reader at its boundary and one byte (or one unit) to each side:
// the file size against the 8-byte length field, the header length against the file and against the
// 100,000,000-byte cap, each tensor's offsets (order, end of data, size for every dtype), how the
// tensors tile the data (touching, sharing one byte, one byte apart, empty tensors at the edges),
// the element limit 2^48 and the integer widths of dims and offsets, the header's nesting depth,
// the integer values that must fit in i32, and alignment (the reader needs none, the writer gives
// it). A check that is off by one shows here as the "at" case refused or the "past" case accepted.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <typeinfo>
#include <vector>

#include "tensorgrad/train/safetensors.h"

namespace tg {
namespace {

using Bytes = std::vector<std::uint8_t>;
const std::string kSource = "edge.safetensors";
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;
constexpr std::uint64_t kTwoPow48 = std::uint64_t{1} << 48;

// A file from a header text and data bytes; the 8-byte length field may lie.
Bytes make_file(const std::string& header, const Bytes& data = {}, std::optional<std::uint64_t> length = {}) {
  Bytes out(8 + header.size() + data.size());
  const std::uint64_t n = length.value_or(header.size());
  for (std::size_t i = 0; i < 8; ++i) out[i] = static_cast<std::uint8_t>(n >> (8 * i));
  for (std::size_t i = 0; i < header.size(); ++i) out[8 + i] = static_cast<std::uint8_t>(header[i]);
  for (std::size_t i = 0; i < data.size(); ++i) out[8 + header.size() + i] = data[i];
  return out;
}

// One header member: "name":{"dtype":..,"shape":..,"data_offsets":[begin,end]}. Offsets are text so
// that numbers past 64 bits can be written.
std::string tensor(const std::string& name, const std::string& dtype, const std::string& shape,
                   const std::string& begin, const std::string& end) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" + begin + "," +
         end + "]}";
}
std::string tensor(const std::string& name, const std::string& dtype, const std::string& shape, std::uint64_t begin,
                   std::uint64_t end) {
  return tensor(name, dtype, shape, std::to_string(begin), std::to_string(end));
}
std::string object(const std::vector<std::string>& members) {
  std::string out = "{";
  for (std::size_t i = 0; i < members.size(); ++i) out += (i ? "," : "") + members[i];
  return out + "}";
}

Bytes little_endian(std::uint64_t v, std::size_t bytes) {
  Bytes out(bytes);
  for (std::size_t i = 0; i < bytes; ++i) out[i] = static_cast<std::uint8_t>(v >> (8 * i));
  return out;
}

// One file at one side of one check: accepted (refusal empty; then tensor `value_of`, if named,
// must hold `value` at element 0) or refused by a SafetensorsError whose message is
// "safetensors file 'edge.safetensors': " followed by `refusal` (which may be cut short).
struct Edge {
  std::string name;  // <check>_<side>: below, at or past the boundary
  Bytes bytes;
  std::string refusal;
  std::string value_of = {};
  double value = 0;
};

void PrintTo(const Edge& e, std::ostream* os) {
  *os << e.name << (e.refusal.empty() ? " -> accepted" : " -> refused: " + e.refusal);
}

std::vector<Edge> framing_edges() {
  const std::string spaced = "{} ";  // a header of 3 bytes, whitespace included
  return {
      // The file must hold the 8-byte length field.
      {"file_size_below", Bytes(7, 0), "the file has 7 bytes, fewer than the 8-byte header length"},
      {"file_size_at", Bytes(8, 0), "the header does not start with '{'"},  // passes, the next check refuses
      // The header length against the file: header "{} " and no data.
      {"header_length_below", make_file(spaced, {}, 2), "data bytes 0..1 at the end of the file belong to no tensor"},
      {"header_length_at", make_file(spaced), ""},
      {"header_length_past", make_file(spaced, {}, 4), "header length 4 runs past the end of the 11-byte file"},
      // The cap, on a short file: at the cap the length passes it and runs past the file instead.
      {"header_cap_below", make_file(spaced, {}, kMaxHeaderBytes - 1),
       "header length 99999999 runs past the end of the 11-byte file"},
      {"header_cap_at", make_file(spaced, {}, kMaxHeaderBytes),
       "header length 100000000 runs past the end of the 11-byte file"},
      {"header_cap_past", make_file(spaced, {}, kMaxHeaderBytes + 1),
       "header length 100000001 is over the limit of 100000000 bytes"},
  };
}

std::vector<Edge> offset_edges() {
  const Bytes four = little_endian(std::bit_cast<std::uint32_t>(1.5f), 4);
  return {
      // begin <= end: an empty tensor after a one-element one.
      {"offsets_order_below",
       make_file(object({tensor("a", "F32", "[1]", 0, 4), tensor("e", "F32", "[0]", 3, 4)}), four),
       "tensor 'e': data_offsets [3, 4] hold 1 bytes, but F32[0] needs 0"},
      {"offsets_order_at", make_file(object({tensor("a", "F32", "[1]", 0, 4), tensor("e", "F32", "[0]", 4, 4)}), four),
       "", "a", 1.5},
      {"offsets_order_past",
       make_file(object({tensor("a", "F32", "[1]", 0, 4), tensor("e", "F32", "[0]", 5, 4)}), four),
       "tensor 'e': data_offsets [5, 4] end before they begin"},
      // end <= the data's size.
      {"offsets_end_below", make_file(object({tensor("w", "BOOL", "[7]", 0, 7)}), Bytes(8, 0)),
       "data bytes 7..8 at the end of the file belong to no tensor"},
      {"offsets_end_at", make_file(object({tensor("w", "BOOL", "[8]", 0, 8)}), Bytes(8, 0)), ""},
      {"offsets_end_past", make_file(object({tensor("w", "BOOL", "[8]", 1, 9)}), Bytes(8, 0)),
       "tensor 'w': data_offsets [1, 9] run past the end of the 8-byte data"},
      // Offsets are counts up to 2^64 - 1; one more is not an integer of 64 bits.
      {"offsets_width_at", make_file(object({tensor("w", "BOOL", "[8]", "0", "18446744073709551615")}), Bytes(8, 0)),
       "tensor 'w': data_offsets [0, 18446744073709551615] run past the end of the 8-byte data"},
      {"offsets_width_past", make_file(object({tensor("w", "BOOL", "[8]", "0", "18446744073709551616")}), Bytes(8, 0)),
       "tensor 'w': data_offsets end must be a non-negative integer, got 1.8446744073709552e+19 (past 2^64 - 1)"},
  };
}

// For every dtype, a [3] tensor whose byte range is exactly 3 elements wide, one byte short, one over.
std::vector<Edge> dtype_size_edges() {
  const std::pair<const char*, std::uint64_t> dtypes[] = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4},  {"I16", 2},
      {"I8", 1},  {"U64", 8}, {"U32", 4}, {"U16", 2},  {"U8", 1},  {"BOOL", 1},
  };
  std::vector<Edge> out;
  for (const auto& [dtype, width] : dtypes) {
    const std::uint64_t needed = 3 * width;
    const auto with_bytes = [&, dtype = dtype](std::uint64_t n) {
      return make_file(object({tensor("w", dtype, "[3]", 0, n)}), Bytes(n, 0));
    };
    const auto refusal = [&, dtype = dtype](std::uint64_t n) {
      return "tensor 'w': data_offsets [0, " + std::to_string(n) + "] hold " + std::to_string(n) + " bytes, but " +
             dtype + "[3] needs " + std::to_string(needed);
    };
    const std::string check = std::string("size_of_") + dtype;
    out.push_back({check + "_below", with_bytes(needed - 1), refusal(needed - 1)});
    out.push_back({check + "_at", with_bytes(needed), "", "w", 0.0});
    out.push_back({check + "_past", with_bytes(needed + 1), refusal(needed + 1)});
  }
  return out;
}

// The tensors must tile the data: a F32[2] 'a' at bytes 0..8 and a F32[1] 'b' after it.
std::vector<Edge> tiling_edges() {
  const auto a_and_b = [](std::uint64_t b_begin) {
    return make_file(object({tensor("a", "F32", "[2]", 0, 8), tensor("b", "F32", "[1]", b_begin, b_begin + 4)}),
                     Bytes(b_begin + 4, 0));
  };
  // The same with the names swapped, so the tensor first in the header is second in the data.
  const auto b_then_a = [](std::uint64_t a_begin) {
    return make_file(object({tensor("a", "F32", "[1]", a_begin, a_begin + 4), tensor("b", "F32", "[2]", 0, 8)}),
                     Bytes(a_begin + 4, 0));
  };
  // An empty tensor 'e' at `at` next to 'a' at bytes 0..8.
  const auto empty_at = [](std::uint64_t at) {
    return make_file(object({tensor("a", "F32", "[2]", 0, 8), tensor("e", "F32", "[0,5]", at, at)}), Bytes(8, 0));
  };
  const Bytes four(4, 0);
  return {
      {"overlap_share_one_byte", a_and_b(7), "tensor 'b' (bytes 7..11) overlaps tensor 'a' (bytes 0..8)"},
      {"overlap_touching", a_and_b(8), ""},
      {"overlap_one_byte_apart", a_and_b(9), "data bytes 8..9 belong to no tensor (a hole before tensor 'b')"},
      {"overlap_swapped_share_one_byte", b_then_a(7), "tensor 'a' (bytes 7..11) overlaps tensor 'b' (bytes 0..8)"},
      {"overlap_swapped_touching", b_then_a(8), ""},
      {"overlap_swapped_one_byte_apart", b_then_a(9), "data bytes 8..9 belong to no tensor (a hole before tensor 'a')"},
      // An empty tensor may sit at either end of another, not inside it (as the reference reader).
      {"empty_tensor_at_start", empty_at(0), ""},
      {"empty_tensor_one_byte_inside_start", empty_at(1), "tensor 'e' (bytes 1..1) overlaps tensor 'a' (bytes 0..8)"},
      {"empty_tensor_one_byte_inside_end", empty_at(7), "tensor 'e' (bytes 7..7) overlaps tensor 'a' (bytes 0..8)"},
      {"empty_tensor_at_end", empty_at(8), ""},
      {"empty_tensor_past_end", empty_at(9), "tensor 'e': data_offsets [9, 9] run past the end of the 8-byte data"},
      // The first tensor starts at byte 0; the last ends at the end of the file.
      {"leading_hole_at", make_file(object({tensor("a", "F32", "[1]", 0, 4)}), four), ""},
      {"leading_hole_past", make_file(object({tensor("a", "F32", "[1]", 1, 5)}), Bytes(5, 0)),
       "data bytes 0..1 belong to no tensor (a hole before tensor 'a')"},
      {"trailing_bytes_below", make_file(object({tensor("a", "F32", "[1]", 0, 4)}), Bytes(3, 0)),
       "tensor 'a': data_offsets [0, 4] run past the end of the 3-byte data"},
      {"trailing_bytes_at", make_file(object({tensor("a", "F32", "[1]", 0, 4)}), four), ""},
      {"trailing_bytes_past", make_file(object({tensor("a", "F32", "[1]", 0, 4)}), Bytes(5, 0)),
       "data bytes 4..5 at the end of the file belong to no tensor"},
  };
}

// The element limit 2^48 (a 0 dim counted as 1), and dims as 64-bit integers.
std::vector<Edge> shape_edges() {
  const auto bool_shape = [](const std::string& shape, std::uint64_t bytes) {
    return make_file(object({tensor("w", "BOOL", shape, 0, bytes)}), Bytes(bytes, 0));
  };
  const std::string at = std::to_string(kTwoPow48), past = std::to_string(kTwoPow48 + 1);
  const std::string too_many = " has too many elements: more than 281474976710656 (2^48), the limit of one tensor";
  return {
      // Within the limit the tensor passes it and is refused by its byte range instead.
      {"elements_below", bool_shape("[" + std::to_string(kTwoPow48 - 1) + "]", 8),
       "tensor 'w': data_offsets [0, 8] hold 8 bytes, but BOOL[281474976710655] needs 281474976710655"},
      {"elements_at", bool_shape("[" + at + "]", 8),
       "tensor 'w': data_offsets [0, 8] hold 8 bytes, but BOOL[281474976710656] needs 281474976710656"},
      {"elements_past", bool_shape("[" + past + "]", 8), "tensor 'w': shape [281474976710657]" + too_many},
      {"elements_product_at", bool_shape("[65536,65536,65536]", 8),
       "tensor 'w': data_offsets [0, 8] hold 8 bytes, but BOOL[65536,65536,65536] needs 281474976710656"},
      {"elements_product_past", bool_shape("[65536,65536,65537]", 8),
       "tensor 'w': shape [65536,65536,65537]" + too_many},
      // An empty tensor's other dims count too: at the limit it is a valid, empty tensor.
      {"empty_extent_at", bool_shape("[0," + at + "]", 0), ""},
      {"empty_extent_past", bool_shape("[0," + past + "]", 0), "tensor 'w': shape [0,281474976710657]" + too_many},
      {"dim_int64_at", bool_shape("[9223372036854775807]", 8), "tensor 'w': shape [9223372036854775807]" + too_many},
      {"dim_int64_past", bool_shape("[9223372036854775808]", 8),
       "tensor 'w': shape dimension 9223372036854775808 does not fit in int64"},
      {"dim_uint64_at", bool_shape("[18446744073709551615]", 8),
       "tensor 'w': shape dimension 18446744073709551615 does not fit in int64"},
      {"dim_uint64_past", bool_shape("[18446744073709551616]", 8),
       "tensor 'w': a shape dimension must be a non-negative integer, got 1.8446744073709552e+19 (past 2^64 - 1)"},
  };
}

// 64 levels of nesting are read, 65 refused: root (1), the entry (2), then `arrays` levels in an
// ignored field.
std::vector<Edge> nesting_edges() {
  const auto nested = [](int levels) {
    const int arrays = levels - 2;
    return make_file("{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0],\"x\":" +
                     std::string(arrays, '[') + std::string(arrays, ']') + "}}");
  };
  return {
      {"nesting_below", nested(63), ""},
      {"nesting_at", nested(64), ""},
      {"nesting_past", nested(65), "the header is not valid JSON: nested deeper than 64 levels"},
  };
}

// Integer values read as i32 must fit in it; BOOL bytes must be 0 or 1.
std::vector<Edge> value_edges() {
  const auto one = [](const std::string& dtype, std::uint64_t width, std::uint64_t bits) {
    return make_file(object({tensor("w", dtype, "[1]", 0, width)}), little_endian(bits, width));
  };
  const std::uint64_t max = 2147483647;
  const auto neg = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
  return {
      {"i64_max_below", one("I64", 8, max - 1), "", "w", 2147483646.0},
      {"i64_max_at", one("I64", 8, max), "", "w", 2147483647.0},
      {"i64_max_past", one("I64", 8, max + 1), "tensor 'w' (I64) element 0 = 2147483648 does not fit in i32"},
      {"i64_min_below", one("I64", 8, neg(-2147483647)), "", "w", -2147483647.0},
      {"i64_min_at", one("I64", 8, neg(-2147483648)), "", "w", -2147483648.0},
      {"i64_min_past", one("I64", 8, neg(-2147483649)), "tensor 'w' (I64) element 0 = -2147483649 does not fit in i32"},
      {"u32_max_at", one("U32", 4, max), "", "w", 2147483647.0},
      {"u32_max_past", one("U32", 4, max + 1), "tensor 'w' (U32) element 0 = 2147483648 does not fit in i32"},
      {"u64_max_at", one("U64", 8, max), "", "w", 2147483647.0},
      {"u64_max_past", one("U64", 8, max + 1), "tensor 'w' (U64) element 0 = 2147483648 does not fit in i32"},
      {"bool_below", one("BOOL", 1, 0), "", "w", 0.0},
      {"bool_at", one("BOOL", 1, 1), "", "w", 1.0},
      {"bool_past", one("BOOL", 1, 2), "tensor 'w' is BOOL but element 0 is byte 2"},
  };
}

// The reader needs no alignment: a header length that is not a multiple of 8 and a F32 one byte
// past an element boundary are read.
std::vector<Edge> alignment_edges() {
  Bytes data = {1};
  const Bytes value = little_endian(std::bit_cast<std::uint32_t>(-2.25f), 4);
  data.insert(data.end(), value.begin(), value.end());
  return {
      {"unaligned_f32", make_file(object({tensor("b", "BOOL", "[1]", 0, 1), tensor("w", "F32", "[1]", 1, 5)}), data),
       "", "w", -2.25},
      {"header_length_not_a_multiple_of_8", make_file("{}       ", {}), ""},  // 9 bytes
  };
}

std::vector<Edge> all_edges() {
  std::vector<Edge> all;
  for (auto part : {framing_edges(), offset_edges(), dtype_size_edges(), tiling_edges(), shape_edges(), nesting_edges(),
                    value_edges(), alignment_edges()}) {
    for (Edge& e : part) all.push_back(std::move(e));
  }
  return all;
}

class SafetensorsBoundary : public ::testing::TestWithParam<Edge> {};

TEST_P(SafetensorsBoundary, AcceptedOrRefusedAsTheRuleSays) {
  const Edge& e = GetParam();
  if (e.refusal.empty()) {
    SafetensorsFile file;
    try {
      file = decode_safetensors(e.bytes, kSource);
    } catch (const std::exception& error) {
      FAIL() << "refused a file the rule accepts: " << error.what();
    }
    if (!e.value_of.empty()) {
      ASSERT_TRUE(file.tensors.contains(e.value_of));
      EXPECT_EQ(file.tensors.at(e.value_of).at(0), e.value);
    }
    return;
  }
  try {
    (void)decode_safetensors(e.bytes, kSource);
  } catch (const std::exception& error) {
    EXPECT_EQ(typeid(error), typeid(SafetensorsError)) << error.what();
    const std::string message = error.what();
    EXPECT_EQ(message.rfind("safetensors file '" + kSource + "': " + e.refusal, 0), 0u)
        << "message: " << message << "\nexpected it to start with the refusal: " << e.refusal;
    return;
  }
  FAIL() << "accepted a file the rule refuses (expected: " << e.refusal << ")";
}

INSTANTIATE_TEST_SUITE_P(Checks, SafetensorsBoundary, ::testing::ValuesIn(all_edges()),
                         [](const ::testing::TestParamInfo<Edge>& param_info) { return param_info.param.name; });

// The header cap with a real header of exactly 100,000,000 bytes ("{}" and spaces): read.
TEST(SafetensorsBoundaryCap, HeaderOfExactlyTheCapIsRead) {
  std::string header = "{}";
  header.resize(kMaxHeaderBytes, ' ');
  const SafetensorsFile file = decode_safetensors(make_file(header), kSource);
  EXPECT_TRUE(file.tensors.empty());
}

// The writer pads the header to a multiple of 8 for every length it can have (names of 1..16
// characters move the unpadded length through every residue), with fewer than 8 spaces, so every
// tensor, widest first, starts at a multiple of its element size.
TEST(SafetensorsBoundaryAlignment, WriterAlignsDataForEveryHeaderLength) {
  std::set<std::uint64_t> residues;
  for (std::size_t length = 1; length <= 16; ++length) {
    const std::string name(length, 'n');
    const TensorMap tensors = {{name, HostTensor::of({DType::boolean, {3}}, {1, 0, 1})},
                               {"f", HostTensor::of({DType::f32, {1}}, {2})},
                               {"i", HostTensor::of({DType::i32, {2}}, {-1, 7})}};
    const Bytes bytes = encode_safetensors(tensors);
    std::uint64_t header = 0;
    for (int i = 0; i < 8; ++i) header |= static_cast<std::uint64_t>(bytes[static_cast<std::size_t>(i)]) << (8 * i);
    const std::string text(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(header));
    const std::size_t json_end = text.find_last_not_of(' ') + 1;
    residues.insert(json_end % 8);
    EXPECT_EQ((8 + header) % 8, 0u) << text;
    EXPECT_LT(header - json_end, 8u) << text;
    // Widest first: f (F32) and i (I32) at 4-byte multiples, then the BOOL.
    EXPECT_NE(text.find("\"f\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}"), std::string::npos) << text;
    EXPECT_NE(text.find("\"i\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[4,12]}"), std::string::npos) << text;
    const SafetensorsFile back = decode_safetensors(bytes, kSource);
    EXPECT_EQ(back.tensors.at(name).at(2), 1.0);
  }
  EXPECT_EQ(residues.size(), 8u) << "the names did not move the header length through every residue mod 8";
}

}  // namespace
}  // namespace tg
