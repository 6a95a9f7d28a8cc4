// safetensors files: round trips, atomic saves that leave nothing half-written, load_matching's
// one message for every mismatch, the goldens written by the real `safetensors` package
// (tools/safetensors_interop.py write), the file it checks (tools/safetensors_interop.py check),
// and corrupt files: every truncation and random byte flips throw SafetensorsError, never crash.
#include "tensorgrad/train/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

namespace tg {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kFloatDenormMin = std::numeric_limits<float>::denorm_min();
const double kFloatMax = std::numeric_limits<float>::max();

const fs::path kDataDir = fs::path(TG_SOURCE_DIR) / "tests/unit/data/safetensors";

// A fresh directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() / ("tg_safetensors_" + std::to_string(::getpid()) + "_" + test->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(path_)) names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  fs::path path_;
};

Bytes read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A file from a header text and raw data; the length field may lie.
Bytes make_file(const std::string& header, const Bytes& data = {}, std::optional<std::uint64_t> length = {}) {
  Bytes out(8 + header.size() + data.size());
  const std::uint64_t n = length.value_or(header.size());
  for (std::size_t i = 0; i < 8; ++i) out[i] = static_cast<std::uint8_t>(n >> (8 * i));
  for (std::size_t i = 0; i < header.size(); ++i) out[8 + i] = static_cast<std::uint8_t>(header[i]);
  for (std::size_t i = 0; i < data.size(); ++i) out[8 + header.size() + i] = data[i];
  return out;
}

// Equal types and values; NaN equals NaN, and -0.0 only -0.0.
void expect_same(const HostTensor& got, const HostTensor& want, const std::string& name) {
  ASSERT_EQ(got.type, want.type) << name;
  ASSERT_EQ(got.size(), want.size()) << name;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double g = got.at(i), w = want.at(i);
    const bool same = std::isnan(w) ? std::isnan(g) : (g == w && std::signbit(g) == std::signbit(w));
    EXPECT_TRUE(same) << name << "[" << i << "] = " << g << ", want " << w;
  }
}

HostTensor f32(Shape shape, std::vector<double> values) {
  return HostTensor::of({DType::f32, std::move(shape)}, std::move(values));
}
HostTensor i32(Shape shape, std::vector<double> values) {
  return HostTensor::of({DType::i32, std::move(shape)}, std::move(values));
}
HostTensor boolean(Shape shape, std::vector<double> values) {
  return HostTensor::of({DType::boolean, std::move(shape)}, std::move(values));
}
HostTensor f16(Shape shape, std::vector<double> values) {
  return HostTensor::of({DType::f16, std::move(shape)}, std::move(values));
}
HostTensor bf16(Shape shape, std::vector<double> values) {
  return HostTensor::of({DType::bf16, std::move(shape)}, std::move(values));
}

// The tensors of cpp_written.safetensors; tools/safetensors_interop.py (cpp_expected) repeats them.
TensorMap cpp_written_tensors() {
  std::vector<double> w;
  for (int k = 0; k < 6; ++k) w.push_back(k * 0.75 - 2);
  w[1] = -0.0;
  w[4] = kInf;
  TensorMap t;
  t.emplace("w", f32({2, 3}, w));
  t.emplace("b", f32({3}, {kNaN, kFloatDenormMin, kFloatMax}));
  t.emplace("steps", i32({}, {12345}));
  t.emplace("ids", i32({4}, {-2147483648.0, 2147483647.0, 0, -7}));
  t.emplace("mask", boolean({2, 2}, {1, 0, 0, 1}));
  t.emplace("empty", f32({0}, {}));
  t.emplace("layers.0.na\xc3\xafve \xe2\x9c\x93", f32({1}, {static_cast<double>(0.1f)}));
  return t;
}
const SafetensorsMetadata kCppMetadata = {{"format", "pt"},
                                          {"step", "12345"},
                                          {"note",
                                           "quote \" backslash \\ newline \n tab \t \xc3\xbcn\xc3\xaf"
                                           "c\xc3\xb8"
                                           "d\xc3\xa9 \xe2\x9c\x93"}};

TEST(Safetensors, RoundTripKeepsTypesValuesAndMetadata) {
  TempDir dir;
  const TensorMap tensors = cpp_written_tensors();
  save_safetensors(dir.file("a.safetensors"), tensors, kCppMetadata);
  const SafetensorsFile file = load_safetensors(dir.file("a.safetensors"));
  EXPECT_EQ(file.metadata, kCppMetadata);
  ASSERT_EQ(file.tensors.size(), tensors.size());
  for (const auto& [name, tensor] : tensors) {
    ASSERT_TRUE(file.tensors.contains(name)) << name;
    expect_same(file.tensors.at(name), tensor, name);
    EXPECT_EQ(file.stored_dtypes.at(name), tensor.type.dtype == DType::f32   ? "F32"
                                           : tensor.type.dtype == DType::i32 ? "I32"
                                                                             : "BOOL");
  }
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"a.safetensors"}) << "no temporary file is left";
}

TEST(Safetensors, F32ValuesAreRoundedToFloatWhenSaved) {
  const SafetensorsFile file = decode_safetensors(encode_safetensors({{"x", f32({2}, {0.1, 1e300})}}));
  EXPECT_EQ(file.tensors.at("x").to_f64(), (std::vector<double>{static_cast<double>(0.1f), kInf}));
}

// The data starts 8-byte aligned and the 4-byte tensors come before the 1-byte ones, so every
// tensor is aligned to its element size whatever the names.
TEST(Safetensors, DataIsAligned) {
  const Bytes bytes = encode_safetensors({{"a", boolean({3}, {1, 0, 1})}, {"b", f32({1}, {2})}});
  std::uint64_t header = 0;
  for (int i = 0; i < 8; ++i) header |= static_cast<std::uint64_t>(bytes[i]) << (8 * i);
  EXPECT_EQ((8 + header) % 8, 0u);
  const std::string text(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(header));
  EXPECT_NE(text.find("\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}"), std::string::npos) << text;
  EXPECT_NE(text.find("\"a\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[4,7]}"), std::string::npos) << text;
}

TEST(Safetensors, SaveReplacesTheFileWhole) {
  TempDir dir;
  const std::string path = dir.file("p.safetensors");
  save_safetensors(path, {{"a", f32({2}, {1, 2})}, {"b", f32({1}, {3})}}, {{"step", "1"}});
  save_safetensors(path, {{"a", f32({1}, {5})}});
  const SafetensorsFile file = load_safetensors(path);
  EXPECT_EQ(file.tensors.size(), 1u);
  EXPECT_EQ(file.tensors.at("a").to_f64(), std::vector<double>{5});
  EXPECT_TRUE(file.metadata.empty());
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"p.safetensors"});
}

// Values that do not fit their type, and names the format cannot hold, are refused before any
// file is touched: the old file stays and no temporary file is left.
TEST(Safetensors, RefusedSaveLeavesTheOldFile) {
  TempDir dir;
  const std::string path = dir.file("p.safetensors");
  save_safetensors(path, {{"keep", f32({1}, {7})}});
  const Bytes before = read_bytes(path);
  const std::vector<std::pair<TensorMap, std::string>> refused = {
      {{{"n", i32({2}, {1, 1.5})}}, "element 1 = 1.500000 is not an i32"},
      {{{"n", i32({1}, {3e9})}}, "is not an i32"},
      {{{"m", boolean({1}, {2})}}, "is not a bool"},
      {{{"__metadata__", f32({1}, {1})}}, "reserved"},
      {{{"bad\xff", f32({1}, {1})}}, "not valid UTF-8"},
  };
  for (const auto& [tensors, why] : refused) {
    try {
      save_safetensors(path, tensors);
      ADD_FAILURE() << "saved although " << why;
    } catch (const SafetensorsError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(save_safetensors(path, {}, {{"k", "\xc0\x80"}}), SafetensorsError);  // overlong UTF-8
  EXPECT_EQ(read_bytes(path), before);
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"p.safetensors"});
}

// A failure after the temporary file is written (here the rename: the target is a directory)
// removes the temporary file.
// A directory at the target is refused (before the write: tests/unit/safe_file_output_test.cpp
// has the other file types) and leaves no temporary file.
TEST(Safetensors, SavingOverADirectoryFailsAndLeavesNoTemporaryFile) {
  TempDir dir;
  fs::create_directories(dir.file("target/inside"));
  try {
    save_safetensors(dir.file("target"), {{"a", f32({1}, {1})}});
    ADD_FAILURE() << "saved over a directory";
  } catch (const SafetensorsError& e) {
    EXPECT_NE(std::string(e.what()).find("it is a directory, not a regular file"), std::string::npos) << e.what();
  }
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"target"});
  EXPECT_TRUE(fs::is_directory(dir.file("target/inside")));
}

TEST(Safetensors, MissingFilesAndDirectoriesAreErrorsNamingThePath) {
  TempDir dir;
  const std::string nowhere = dir.file("no/such/dir/x.safetensors");
  EXPECT_THROW(save_safetensors(nowhere, {{"a", f32({1}, {1})}}), SafetensorsError);
  try {
    load_safetensors(nowhere);
    ADD_FAILURE();
  } catch (const SafetensorsError& e) {
    EXPECT_NE(std::string(e.what()).find(nowhere), std::string::npos) << e.what();
  }
  EXPECT_EQ(dir.listing(), std::vector<std::string>{});
}

TEST(Safetensors, LoadMatchingNamesEveryMismatchInOneMessage) {
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  const Bytes f64_tensor = make_file(R"({"d":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", Bytes(8, 0));
  TensorMap tensors = {{"w", f32({2, 3}, {1, 2, 3, 4, 5, 6})},
                       {"b", f32({3}, {1, 2, 3})},
                       {"step", i32({}, {4})},
                       {"extra1", f32({1}, {0})},
                       {"extra2", boolean({1}, {1})}};
  save_safetensors(path, tensors, {{"step", "4"}});
  const std::map<std::string, TensorType> good = {{"w", {DType::f32, {2, 3}}},
                                                  {"b", {DType::f32, {3}}},
                                                  {"step", {DType::i32, {}}},
                                                  {"extra1", {DType::f32, {1}}},
                                                  {"extra2", {DType::boolean, {1}}}};
  const SafetensorsFile file = load_matching(path, good);
  EXPECT_EQ(file.tensors.at("w"), tensors.at("w"));
  EXPECT_EQ(file.metadata.at("step"), "4");

  const std::map<std::string, TensorType> expected = {{"w", {DType::f32, {3, 2}}},
                                                      {"b", {DType::f32, {3}}},
                                                      {"step", {DType::f32, {}}},
                                                      {"gone1", {DType::f32, {4}}},
                                                      {"gone2", {DType::i32, {1}}}};
  try {
    load_matching(path, expected);
    ADD_FAILURE() << "loaded a mismatching file";
  } catch (const SafetensorsError& e) {
    const std::string m = e.what();
    for (const char* part : {"missing: 'gone1' f32[4], 'gone2' i32[1]", "unexpected: 'extra1' f32[1], 'extra2' bool[1]",
                             "'w': expected f32[3,2], found f32[2,3]", "'step': expected f32[], found i32[]"}) {
      EXPECT_NE(m.find(part), std::string::npos) << "no \"" << part << "\" in:\n" << m;
    }
    EXPECT_NE(m.find(path), std::string::npos) << m;
    EXPECT_EQ(m.find("'b'"), std::string::npos) << "a matching tensor is not listed:\n" << m;
  }
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(f64_tensor.data()), f64_tensor.size());
  try {
    load_matching(path, {{"d", {DType::f32, {2}}}});
    ADD_FAILURE();
  } catch (const SafetensorsError& e) {
    EXPECT_NE(std::string(e.what()).find("'d': expected f32[2], found f32[1] (stored as F64)"), std::string::npos)
        << e.what();
  }
}

// The golden written by safetensors.numpy.save_file (tools/safetensors_interop.py, numpy_golden).
TEST(Safetensors, ReadsTheFileWrittenByNumpy) {
  const SafetensorsFile file = load_safetensors((kDataDir / "python_numpy.safetensors").string());
  std::vector<double> matrix;
  for (int k = 0; k < 12; ++k) matrix.push_back(k * 0.25 - 1.5);
  matrix[5] = -0.0;
  matrix[6] = kInf;
  matrix[7] = -kInf;
  matrix[8] = kNaN;
  matrix[9] = kFloatDenormMin;
  matrix[10] = kFloatMax;
  std::vector<double> sixteenths;
  for (int k = 0; k < 16; ++k) sixteenths.push_back(k / 16.0);
  const std::map<std::string, std::pair<std::string, HostTensor>> want = {
      {"f32.matrix", {"F32", f32({3, 4}, matrix)}},
      // F64 values are kept unrounded.
      {"f64.vector", {"F64", f32({5}, {0.1, -2.5, 1e300, 5e-324, -0.0})}},
      // float16(0.1) is 0.0999755859375; 2^-24 is float16's smallest subnormal.
      {"f16.values", {"F16", f16({2, 3}, {1.5, -2.0, 65504.0, std::ldexp(1.0, -24), -kInf, 0.0999755859375})}},
      {"i64.ids", {"I64", i32({4}, {0, -1, 2147483647.0, -2147483648.0})}},
      {"i32.scalar", {"I32", i32({}, {7})}},
      {"i16", {"I16", i32({3}, {-32768, 32767, 5})}},
      {"i8", {"I8", i32({2, 2}, {-128, 127, 0, -1})}},
      {"u8", {"U8", i32({3}, {0, 255, 17})}},
      {"u16", {"U16", i32({2}, {65535, 1})}},
      {"u32", {"U32", i32({2}, {2147483647.0, 0})}},
      {"u64", {"U64", i32({1}, {2147483647.0})}},
      {"mask", {"BOOL", boolean({2, 3}, {1, 0, 0, 1, 1, 0})}},
      {"empty", {"F32", f32({0, 3}, {})}},
      {"layers.0.attn.q.W", {"F32", f32({2, 2, 2, 2}, sixteenths)}},
      {"na\xc3\xafve \xe2\x9c\x93", {"F32", f32({1}, {42})}},
  };
  ASSERT_EQ(file.tensors.size(), want.size());
  for (const auto& [name, dtype_and_tensor] : want) {
    ASSERT_TRUE(file.tensors.contains(name)) << name;
    EXPECT_EQ(file.stored_dtypes.at(name), dtype_and_tensor.first) << name;
    expect_same(file.tensors.at(name), dtype_and_tensor.second, name);
  }
  const SafetensorsMetadata metadata = {{"format", "np"},
                                        {"step", "1200"},
                                        {"note",
                                         "quote \" backslash \\ \xc3\xbcn\xc3\xaf"
                                         "c\xc3\xb8"
                                         "d\xc3\xa9 \xe2\x9c\x93"}};
  EXPECT_EQ(file.metadata, metadata);
}

// The golden written by safetensors.torch.save_file (tools/safetensors_interop.py, torch_golden).
TEST(Safetensors, ReadsTheFileWrittenByTorch) {
  const SafetensorsFile file = load_safetensors((kDataDir / "python_torch.safetensors").string());
  const std::map<std::string, std::pair<std::string, HostTensor>> want = {
      {"bf16", {"BF16", bf16({4}, {1.0, -3.140625, std::ldexp(1.0, 100), std::ldexp(1.0, -133)})}},
      {"f32", {"F32", f32({2, 3}, {0, 0.5, 1, 1.5, 2, 2.5})}},
      {"mask", {"BOOL", boolean({3}, {1, 0, 1})}},
      {"i64", {"I64", i32({2}, {-5, 3})}},
      {"f16.negzero", {"F16", f16({1}, {-0.0})}},
  };
  ASSERT_EQ(file.tensors.size(), want.size());
  for (const auto& [name, dtype_and_tensor] : want) {
    ASSERT_TRUE(file.tensors.contains(name)) << name;
    EXPECT_EQ(file.stored_dtypes.at(name), dtype_and_tensor.first) << name;
    expect_same(file.tensors.at(name), dtype_and_tensor.second, name);
  }
  EXPECT_EQ(file.metadata, (SafetensorsMetadata{{"format", "pt"}}));
}

// cpp_written.safetensors is what tools/safetensors_interop.py check read back with the real
// package; our writer must still produce it byte for byte. TG_UPDATE_SAFETENSORS_GOLDEN=1 rewrites
// it (then run the Python check again).
TEST(Safetensors, WritesTheFileThePythonPackageChecked) {
  const fs::path golden = kDataDir / "cpp_written.safetensors";
  if (const char* update = std::getenv("TG_UPDATE_SAFETENSORS_GOLDEN"); update && std::string(update) == "1") {
    save_safetensors(golden.string(), cpp_written_tensors(), kCppMetadata);
  }
  EXPECT_EQ(encode_safetensors(cpp_written_tensors(), kCppMetadata), read_bytes(golden));
}

std::string decode_error(const Bytes& bytes) {
  try {
    decode_safetensors(bytes, "corrupt.safetensors");
  } catch (const SafetensorsError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape, int begin, int end) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" +
         std::to_string(begin) + "," + std::to_string(end) + "]}";
}

TEST(Safetensors, CorruptFilesAreErrorsSayingWhatIsWrong) {
  const Bytes four(4, 0), eight(8, 0);
  const std::string a = entry("a", "F32", "[1]", 0, 4);
  const std::string deep = "{\"__metadata__\":" + std::string(100, '[') + std::string(100, ']') + "}";
  const std::vector<std::pair<Bytes, std::string>> cases = {
      {{}, "fewer than the 8-byte header length"},
      {{1, 0, 0}, "fewer than the 8-byte header length"},
      {make_file("{}", {}, std::uint64_t{1} << 62), "over the limit"},
      {make_file("{}", {}, 100'000'001), "over the limit"},
      {make_file("{" + a + "}", four, 1000), "header length 1000 runs past the end of the"},
      {make_file("", {}), "does not start with '{'"},
      {make_file("[1]"), "does not start with '{'"},
      {make_file("{\"a\":"), "not valid JSON: at byte 5"},
      {make_file("{" + a + "} x", four), "expected end of input"},
      {make_file("{" + a + "," + a + "}", four), "duplicate key \"a\""},
      {make_file("{\"a\":[1]}"), "tensor 'a': expected an object, got an array"},
      {make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", four), "lacks \"data_offsets\""},
      {make_file("{" + entry("a", "F8_E4M3", "[1]", 0, 1) + "}", {0}), "dtype \"F8_E4M3\", which tensorgrad does not"},
      {make_file("{" + entry("a", "F32", "[-1]", 0, 4) + "}", four), "a shape dimension must be a non-negative"},
      {make_file("{" + entry("a", "F32", "[1.0]", 0, 4) + "}", four), "must be a non-negative integer, got 1.0"},
      {make_file("{" + entry("a", "F32", "[99999999999999999999]", 0, 4) + "}", four), "non-negative integer"},
      {make_file("{" + entry("a", "F32", "[4294967296,4294967296]", 0, 4) + "}", four), "too many elements"},
      {make_file("{" + entry("a", "F32", "[1]", 0, 8) + "}", four), "run past the end of the 4-byte data"},
      {make_file("{" + entry("a", "F32", "[1]", 4, 0) + "}", four), "end before they begin"},
      {make_file("{" + entry("a", "F32", "[2]", 0, 4) + "}", four), "hold 4 bytes, but F32[2] needs 8"},
      {make_file("{" + a + "," + entry("b", "F32", "[1]", 2, 6) + "}", eight), "overlaps tensor 'a'"},
      {make_file("{" + entry("b", "F32", "[1]", 4, 8) + "}", eight), "data bytes 0..4 belong to no tensor"},
      {make_file("{" + a + "}", eight), "data bytes 4..8 at the end of the file belong to no tensor"},
      {make_file("{\"__metadata__\":{\"k\":1}}"), "value of \"k\" is a number"},
      {make_file(deep), "nested deeper than 64 levels"},
      {make_file("{\"a\xff\":1}"), "ill-formed UTF-8"},
      {make_file("{\"\\ud800\":1}"), "surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF"},
      {make_file("{\"a\":01}"), "leading zeros"},
      {make_file("{" + entry("a", "BOOL", "[2]", 0, 2) + "}", {1, 2}), "is BOOL but element 1 is byte 2"},
      {make_file("{" + entry("a", "I64", "[1]", 0, 8) + "}", {0, 0, 0, 0x80, 0, 0, 0, 0}),
       "(I64) element 0 = 2147483648 does not fit in i32"},
      {make_file("{" + entry("a", "I64", "[1]", 0, 8) + "}", {0xFF, 0xFF, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF}),
       "(I64) element 0 = -2147483649 does not fit in i32"},
      {make_file("{" + entry("a", "U64", "[1]", 0, 8) + "}", Bytes(8, 0xFF)),
       "(U64) element 0 = 18446744073709551615 does not fit in i32"},
  };
  for (const auto& [bytes, why] : cases) {
    const std::string message = decode_error(bytes);
    EXPECT_NE(message.find("safetensors file 'corrupt.safetensors': "), std::string::npos) << message;
    EXPECT_NE(message.find(why), std::string::npos) << "want \"" << why << "\" in: " << message;
  }
}

// The parts of the reader the goldens do not reach: JSON escapes, F16 specials, padding, nulls.
TEST(Safetensors, ReadsWhatTheSpecAllows) {
  // F16 bits: 0x0001 (smallest subnormal), 0x7C00 (inf), 0x7E00 (NaN), 0xFBFF (lowest).
  const Bytes half = {0x01, 0x00, 0x00, 0x7C, 0x00, 0x7E, 0xFF, 0xFB};
  const std::string header = "{\"__metadata__\":{\"k\\u00fc\\ud83d\\ude00\":\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"}, " +
                             entry("h", "F16", "[4]", 0, 8) + "," + entry("z", "F32", "[0,2]", 8, 8) + ",\"e\":" +
                             "{\"dtype\":\"I8\",\"shape\":[0],\"data_offsets\":[8,8],\"extra\":null}}   \n ";
  const SafetensorsFile file = decode_safetensors(make_file(header, half));
  EXPECT_EQ(file.metadata, (SafetensorsMetadata{{"k\xc3\xbc\xf0\x9f\x98\x80", "\"\\/\b\f\n\r\t"}}));
  expect_same(file.tensors.at("h"), f16({4}, {std::ldexp(1.0, -24), kInf, kNaN, -65504.0}), "h");
  expect_same(file.tensors.at("z"), f32({0, 2}, {}), "z");
  expect_same(file.tensors.at("e"), i32({0}, {}), "e");
  EXPECT_TRUE(decode_safetensors(make_file("{\"__metadata__\":null}")).metadata.empty());
}

// The header's JSON at its edges: 64 levels of nesting are read and 65 refused (nlohmann's own parser
// has no limit); a syntax error's excerpt of the text is short and ASCII even when the offending token
// is a megabyte of arbitrary bytes; the writer escapes every control character and reads it back.
TEST(Safetensors, HeaderJsonAtItsEdges) {
  const auto nested = [](int levels) {
    return "{\"__metadata__\":null,\"x\":" + std::string(levels - 1, '[') + std::string(levels - 1, ']') + "}";
  };
  EXPECT_EQ(decode_error(make_file(nested(64))),
            "safetensors file 'corrupt.safetensors': tensor 'x': expected an "
            "object, got an array");
  EXPECT_NE(decode_error(make_file(nested(65))).find("the header is not valid JSON: nested deeper than 64 levels"),
            std::string::npos);

  std::string unterminated = "{\"a\":\"";
  for (int i = 0; i < (1 << 19); ++i) unterminated += "\xc3\xa9";  // a megabyte of e-acute
  const std::string message = decode_error(make_file(unterminated));
  EXPECT_NE(message.find("the header is not valid JSON: at byte " + std::to_string(unterminated.size())),
            std::string::npos)
      << message;
  EXPECT_LT(message.size(), 400u) << message;
  EXPECT_TRUE(std::all_of(message.begin(), message.end(), [](char c) { return c > 0 && c < 0x7F; })) << message;
  EXPECT_NE(message.find("last read: '\"\\xc3\\xa9"), std::string::npos) << message;

  std::string controls;
  for (char c = 1; c < 0x20; ++c) controls += c;
  controls += "\x7f\"\\/";
  const SafetensorsMetadata metadata = {{controls, controls}};
  const Bytes bytes = encode_safetensors({{controls, f32({1}, {2})}}, metadata);
  const SafetensorsFile file = decode_safetensors(bytes);
  EXPECT_EQ(file.metadata, metadata);
  ASSERT_TRUE(file.tensors.contains(controls));
  expect_same(file.tensors.at(controls), f32({1}, {2}), "controls");
}

// Every truncation of a valid file is an error; random byte changes give an error or a file whose
// tensors hold as many values as their shapes say, never a crash (the ASan build checks the rest).
TEST(Safetensors, TruncationsAndByteFlipsNeverCrash) {
  std::vector<Bytes> seeds = {read_bytes(kDataDir / "python_numpy.safetensors"),
                              read_bytes(kDataDir / "python_torch.safetensors"),
                              encode_safetensors(cpp_written_tensors(), kCppMetadata)};
  std::mt19937_64 rng(20240607);
  int decoded = 0, refused = 0;
  for (const Bytes& seed : seeds) {
    ASSERT_GT(seed.size(), 8u);
    ASSERT_NO_THROW(decode_safetensors(seed));
    for (std::size_t length = 0; length < seed.size(); ++length) {
      EXPECT_THROW(decode_safetensors(std::span(seed.data(), length)), SafetensorsError) << "length " << length;
    }
    std::uint64_t header = 0;
    for (int i = 0; i < 8; ++i) header |= static_cast<std::uint64_t>(seed[i]) << (8 * i);
    for (int trial = 0; trial < 3000; ++trial) {
      Bytes bytes = seed;
      const int changes = 1 + static_cast<int>(rng() % 4);
      for (int c = 0; c < changes; ++c) {
        // Mostly in the length field and the header, where the parser's decisions are.
        const std::size_t limit = rng() % 4 == 0 ? bytes.size() : 8 + header;
        const std::size_t at = rng() % limit;
        bytes[at] =
            rng() % 2 ? static_cast<std::uint8_t>(rng()) : static_cast<std::uint8_t>(bytes[at] ^ (1u << (rng() % 8)));
      }
      try {
        const SafetensorsFile file = decode_safetensors(bytes);
        for (const auto& [name, tensor] : file.tensors) {
          ASSERT_EQ(static_cast<std::int64_t>(tensor.size()), tensor.type.size()) << name;
        }
        ++decoded;
      } catch (const SafetensorsError&) {
        ++refused;
      }
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(decoded, 0) << "flips in tensor data leave a valid file";
}

}  // namespace
}  // namespace tg
