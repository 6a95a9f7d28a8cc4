// Bad-input catalogue, safetensors (tests/support/bad_input.h): corrupt, truncated and malicious
// files (lying header lengths, hostile JSON, byte ranges that overlap, leave holes or overflow,
// values that do not fit), files that are not files (a directory, a FIFO, a device), and saves
// the encoder or the file system refuses. Every refusal is a SafetensorsError naming the file; a
// refused save leaves the target directory bit for bit as it was (no half-written target, no
// temporary file left behind).
#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/bad_input.h"
#include "tensorgrad/train/safetensors.h"

namespace tg {
namespace {

using testing::BadCall;
using testing::BadInputCase;
using testing::ScratchDir;
using testing::stateless;
using testing::throws;

using Bytes = std::vector<std::uint8_t>;
const std::string kSource = "evil.safetensors";

// A file from a header text and data bytes; the 8-byte length field may lie.
Bytes make_file(const std::string& header, const Bytes& data = {}, std::optional<std::uint64_t> length = {}) {
  Bytes out(8 + header.size() + data.size());
  const std::uint64_t n = length.value_or(header.size());
  for (std::size_t i = 0; i < 8; ++i) out[i] = static_cast<std::uint8_t>(n >> (8 * i));
  for (std::size_t i = 0; i < header.size(); ++i) out[8 + i] = static_cast<std::uint8_t>(header[i]);
  for (std::size_t i = 0; i < data.size(); ++i) out[8 + header.size() + i] = data[i];
  return out;
}

// decode_safetensors(bytes, "evil.safetensors") must refuse with every fragment (and the source).
BadInputCase bad_bytes(std::string name, Bytes bytes, std::vector<std::string> fragments) {
  fragments.insert(fragments.begin(), "safetensors file '" + kSource + "'");
  return {.name = std::move(name),
          .setup = stateless([bytes] { (void)decode_safetensors(bytes, kSource); }),
          .expected = throws<SafetensorsError>(),
          .fragments = std::move(fragments)};
}
BadInputCase bad_header(std::string name, const std::string& header, std::vector<std::string> fragments,
                        const Bytes& data = {}) {
  return bad_bytes(std::move(name), make_file(header, data), std::move(fragments));
}

// One F32[2] tensor "w" with the given fields, and 8 data bytes.
std::string entry(const std::string& body) { return "{\"w\":{" + body + "}}"; }
const Bytes kEight(8, 0);

std::vector<BadInputCase> framing_cases() {
  return {
      bad_bytes("empty_file", {}, {"the file has 0 bytes, fewer than the 8-byte header length"}),
      bad_bytes("seven_bytes", Bytes(7, 0), {"the file has 7 bytes, fewer than the 8-byte header length"}),
      bad_bytes("header_length_2_pow_63", make_file("{}", {}, std::uint64_t{1} << 63),
                {"header length 9223372036854775808 is over the limit of"}),
      bad_bytes("header_length_all_ones", make_file("{}", {}, ~std::uint64_t{0}),
                {"header length 18446744073709551615 is over the limit"}),
      bad_bytes("header_length_past_the_end", make_file("{}", {}, 4096),
                {"header length 4096 runs past the end of the 10-byte file"}),
      bad_bytes("header_length_zero", make_file("", {}), {"the header does not start with '{'"}),
      bad_header("header_is_an_array", "[]", {"the header does not start with '{'"}),
      bad_header("header_not_json", "{abc}", {"the header is not valid JSON"}),
      bad_header("header_truncated_json",
                 "{\"w\":", {"the header is not valid JSON", "at byte 5", "unexpected end of input"}),
      bad_header("header_trailing_text", "{} {}", {"the header is not valid JSON", "expected end of input"}),
      bad_header("header_duplicate_key",
                 "{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
                 "\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}",
                 {"duplicate key \"w\""}),
      bad_header("header_invalid_utf8_key", "{\"w\xff\":{}}", {"at byte 3", "ill-formed UTF-8"}),
      bad_header("header_nul_in_a_string", std::string("{\"w\0\":{}}", 9),
                 {"control character U+0000 (NUL) must be escaped"}),
      bad_header("header_lone_surrogate", "{\"\\udc00\":{}}", {"surrogate U+DC00..U+DFFF must follow U+D800..U+DBFF"}),
      bad_header("header_nested_100000_deep", "{\"w\":" + std::string(100000, '[') + std::string(100000, ']') + "}",
                 {"nested deeper than"}),
      bad_header("header_leading_zero_number", entry("\"dtype\":\"F32\",\"shape\":[02],\"data_offsets\":[0,8]"),
                 {"a number may not have leading zeros"}, kEight),
      bad_header("header_duplicate_field_in_an_entry",
                 entry("\"dtype\":\"F32\",\"shape\":[2],\"dtype\":\"I32\",\"data_offsets\":[0,8]"),
                 {"the header is not valid JSON", "duplicate key \"dtype\""}, kEight),
      bad_header("header_duplicate_metadata_key", "{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}",
                 {"duplicate key \"k\""}),
  };
}

std::vector<BadInputCase> entry_cases() {
  return {
      bad_header("entry_not_an_object", "{\"w\":5}", {"tensor 'w': expected an object, got a number"}),
      bad_header("entry_lacks_dtype", entry("\"shape\":[2],\"data_offsets\":[0,8]"), {"tensor 'w' lacks \"dtype\""},
                 kEight),
      bad_header("entry_lacks_shape", entry("\"dtype\":\"F32\",\"data_offsets\":[0,8]"), {"tensor 'w' lacks \"shape\""},
                 kEight),
      bad_header("entry_lacks_offsets", entry("\"dtype\":\"F32\",\"shape\":[2]"), {"tensor 'w' lacks \"data_offsets\""},
                 kEight),
      bad_header("dtype_not_a_string", entry("\"dtype\":4,\"shape\":[2],\"data_offsets\":[0,8]"),
                 {"tensor 'w': \"dtype\" must be a string"}, kEight),
      bad_header("dtype_f8", entry("\"dtype\":\"F8_E4M3\",\"shape\":[8],\"data_offsets\":[0,8]"),
                 {"tensor 'w' has dtype \"F8_E4M3\", which tensorgrad does not read"}, kEight),
      bad_header("dtype_lowercase", entry("\"dtype\":\"f32\",\"shape\":[2],\"data_offsets\":[0,8]"),
                 {"tensor 'w' has dtype \"f32\""}, kEight),
      bad_header("shape_not_an_array", entry("\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]"),
                 {"tensor 'w': \"shape\" must be an array"}, kEight),
      bad_header("shape_negative_dim", entry("\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]"),
                 {"tensor 'w': a shape dimension must be a non-negative integer, got -2"}, kEight),
      bad_header("shape_fractional_dim", entry("\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,8]"),
                 {"a shape dimension must be a non-negative integer, got 1.5"}, kEight),
      bad_header("shape_string_dim", entry("\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]"),
                 {"a shape dimension must be a non-negative integer, got string"}, kEight),
      bad_header(
          "shape_dims_overflow_int64",
          entry("\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4],\"data_offsets\":[0,8]"),
          {"tensor 'w': shape [4294967296,4294967296,4] has too many elements: more than 281474976710656 (2^48)"},
          kEight),
      bad_header("shape_dim_above_uint64",
                 entry("\"dtype\":\"F32\",\"shape\":[18446744073709551616],\"data_offsets\":[0,8]"),
                 {"tensor 'w'", "a shape dimension must be a non-negative integer", "past 2^64 - 1"}, kEight),
      bad_header("shape_negative_zero_dim", entry("\"dtype\":\"F32\",\"shape\":[-0,2],\"data_offsets\":[0,0]"),
                 {"tensor 'w': a shape dimension must be a non-negative integer, got -0"}),
      bad_header("shape_past_the_element_limit",
                 entry("\"dtype\":\"F64\",\"shape\":[2305843009213693952,2],\"data_offsets\":[0,8]"),
                 {"tensor 'w': shape [2305843009213693952,2] has too many elements: more than 281474976710656 (2^48)"},
                 kEight),
      bad_header("offsets_not_a_pair", entry("\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4,8]"),
                 {"tensor 'w': \"data_offsets\" must be an array [begin, end]"}, kEight),
      bad_header("offsets_negative", entry("\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-8,0]"),
                 {"data_offsets begin must be a non-negative integer, got -8"}, kEight),
      bad_header("offsets_end_before_begin", entry("\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]"),
                 {"data_offsets [8, 0] end before they begin"}, kEight),
      bad_header("offsets_past_the_data", entry("\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]"),
                 {"data_offsets [0, 16] run past the end of the 8-byte data"}, kEight),
      bad_header("offsets_past_uint64",
                 entry("\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,18446744073709551615]"),
                 {"run past the end of the 8-byte data"}, kEight),
      bad_header("range_size_differs_from_shape", entry("\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]"),
                 {"data_offsets [0, 4] hold 4 bytes, but F32[2] needs 8"}, Bytes(4, 0)),
  };
}

std::vector<BadInputCase> layout_and_value_cases() {
  const std::string two = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},";
  return {
      bad_header("tensors_overlap", two + "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                 {"tensor 'b' (bytes 4..8) overlaps tensor 'a' (bytes 0..8)"}, kEight),
      bad_header("hole_between_tensors", two + "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[12,16]}}",
                 {"data bytes 8..12 belong to no tensor (a hole before tensor 'b')"}, Bytes(16, 0)),
      bad_header("trailing_data_bytes", entry("\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]"),
                 {"data bytes 8..12 at the end of the file belong to no tensor"}, Bytes(12, 0)),
      bad_header("metadata_not_an_object", "{\"__metadata__\":[1]}", {"\"__metadata__\" must be an object of strings"}),
      bad_header("metadata_value_a_number", "{\"__metadata__\":{\"step\":12}}",
                 {"\"__metadata__\" value of \"step\" is a number, not a string"}),
      bad_header("bool_byte_two", entry("\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[0,2]"),
                 {"tensor 'w' is BOOL but element 1 is byte 2"}, Bytes{1, 2}),
      bad_header("i64_above_i32", entry("\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]"),
                 {"tensor 'w' (I64) element 0 = 4294967296 does not fit in i32"}, Bytes{0, 0, 0, 0, 1, 0, 0, 0}),
      bad_header("i64_below_i32", entry("\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]"),
                 {"tensor 'w' (I64) element 0 = -9223372036854775808 does not fit in i32"},
                 Bytes{0, 0, 0, 0, 0, 0, 0, 0x80}),
      bad_header("u32_above_i32", entry("\"dtype\":\"U32\",\"shape\":[2],\"data_offsets\":[0,8]"),
                 {"tensor 'w' (U32) element 1 = 4294967295 does not fit in i32"},
                 Bytes{0, 0, 0, 0, 255, 255, 255, 255}),
  };
}

// ---- files ----

// A call on files in a scratch directory that holds a good file "good.safetensors"; the directory
// must be the same afterwards.
BadInputCase bad_file_call(std::string name, std::function<void(const ScratchDir&)> call,
                           std::vector<std::string> fragments) {
  return {.name = std::move(name),
          .setup =
              [call] {
                auto dir = std::make_shared<ScratchDir>("safetensors");
                save_safetensors(dir->file("good.safetensors"), {{"w", HostTensor::of({DType::f32, {2}}, {1.5, -2})}},
                                 {{"step", "7"}});
                return BadCall{[dir, call] { call(*dir); }, [dir] { return testing::directory_state(dir->path()); }};
              },
          .expected = throws<SafetensorsError>(),
          .fragments = std::move(fragments)};
}

// Wide storage (HostTensor::of): the only kind that can hold an i32 fraction or a bool 2.
TensorMap one(const std::string& name, TensorType type, std::vector<double> values) {
  return {{name, HostTensor::of(std::move(type), std::move(values))}};
}

// save_safetensors over the good file with tensors the encoder refuses: the old file stays.
BadInputCase bad_save(std::string name, TensorMap tensors, std::vector<std::string> fragments,
                      SafetensorsMetadata metadata = {}) {
  fragments.insert(fragments.begin(), "good.safetensors");
  return bad_file_call(
      std::move(name),
      [tensors, metadata](const ScratchDir& d) { save_safetensors(d.file("good.safetensors"), tensors, metadata); },
      std::move(fragments));
}

std::vector<BadInputCase> file_cases() {
  static const TensorType f2{DType::f32, {2}};
  return {
      bad_file_call("load_missing_file",
                    [](const ScratchDir& d) { (void)load_safetensors(d.file("none.safetensors")); },
                    {"none.safetensors", "cannot open"}),
      bad_file_call("load_a_directory", [](const ScratchDir& d) { (void)load_safetensors(d.path().string()); },
                    {"tg_bad_input_safetensors", "a directory, not a regular file"}),
      bad_file_call("load_a_fifo",
                    [](const ScratchDir& d) {
                      const std::string fifo = d.file("pipe");
                      if (::mkfifo(fifo.c_str(), 0600) != 0) throw Error("mkfifo failed");
                      try {
                        (void)load_safetensors(fifo);
                      } catch (...) {
                        std::filesystem::remove(fifo);
                        throw;
                      }
                    },
                    {"pipe", "not a regular file"}),
      bad_file_call("load_a_character_device", [](const ScratchDir&) { (void)load_safetensors("/dev/zero"); },
                    {"/dev/zero", "not a regular file"}),
      bad_file_call(
          "load_matching_every_mismatch",
          [](const ScratchDir& d) {
            (void)load_matching(d.file("good.safetensors"), {{"v", {DType::f32, {2}}}, {"w", {DType::f32, {3}}}});
          },
          {"does not hold the expected tensors", "missing: 'v' f32[2]", "'w': expected f32[3], found f32[2]"}),
      bad_file_call("load_matching_unexpected_tensor",
                    [](const ScratchDir& d) { (void)load_matching(d.file("good.safetensors"), {}); },
                    {"unexpected: 'w' f32[2]"}),
      bad_save("save_i32_fraction", one("i", {DType::i32, {2}}, {1, 2.5}), {"element 1 = 2.500000 is not an i32"}),
      bad_save("save_i32_above_range", one("i", {DType::i32, {1}}, {4294967296.0}), {"is not an i32"}),
      bad_save("save_bool_two", one("b", {DType::boolean, {1}}, {2}), {"element 0 = 2.000000 is not a bool (0 or 1)"}),
      bad_save("save_reserved_name", one("__metadata__", f2, {1, 2}), {"the name \"__metadata__\" is reserved"}),
      bad_save("save_invalid_utf8_name", one("w\xc3", f2, {1, 2}), {"the name is not valid UTF-8"}),
      bad_save("save_invalid_utf8_metadata", one("w", f2, {1, 2}), {"cannot save metadata", "not valid UTF-8"},
               {{"note", "caf\xe9"}}),
      bad_file_call("save_into_a_missing_directory",
                    [](const ScratchDir& d) {
                      save_safetensors(d.file("no/dir/x.safetensors"), one("w", f2, {1, 2}));
                    },
                    {"no/dir/x.safetensors", "cannot save"}),
      bad_file_call("save_to_a_path_naming_no_file",
                    [](const ScratchDir& d) {
                      save_safetensors(d.path().string() + "/", one("w", f2, {1, 2}));
                    },
                    {"cannot save: the path names no file"}),
      bad_file_call("save_over_a_directory",
                    [](const ScratchDir& d) {
                      std::filesystem::create_directory(d.file("taken"));
                      try {
                        save_safetensors(d.file("taken"), one("w", f2, {1, 2}));
                      } catch (...) {
                        std::filesystem::remove(d.file("taken"));
                        throw;
                      }
                    },
                    {"taken", "cannot save"}),
  };
}

std::vector<BadInputCase> safetensors_table() {
  std::vector<BadInputCase> all;
  for (auto part : {framing_cases(), entry_cases(), layout_and_value_cases(), file_cases()}) {
    for (BadInputCase& c : part) all.push_back(std::move(c));
  }
  return all;
}

TG_BAD_INPUT_SUITE(Safetensors, safetensors_table);

}  // namespace
}  // namespace tg
