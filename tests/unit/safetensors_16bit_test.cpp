// safetensors in f16 and bf16: F16 and BF16 tensors are written and read in their own width, two
// little-endian bytes per element holding exactly the HostTensor's bit patterns (NaN payloads, -0,
// infinities and subnormals included), never widened to f32; a 16-bit tensor loaded for a param of
// another dtype is an error naming the tensor, the file's dtype and the expected one. The file
// written by PyTorch (python_torch.safetensors) is read in safetensors_test.cpp; the file this
// writer produces is checked by tools/safetensors_interop.py check16.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tensorgrad/ir/low_precision.h"
#include "tensorgrad/train/safetensors.h"

namespace tg {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

const fs::path kDataDir = fs::path(TG_SOURCE_DIR) / "tests/unit/data/safetensors";

// Every kind of f16 value: a NaN with a payload, a negative NaN, a signalling-NaN pattern, both
// infinities, the smallest and largest subnormals, -0, the largest finite, 1 and -65504.
const std::vector<std::uint16_t> kF16Bits = {0x7E01, 0xFE00, 0x7C01, 0x7C00, 0xFC00, 0x0001,
                                             0x03FF, 0x8000, 0x7BFF, 0x3C00, 0xFBFF, 0x8001};
// The same for bf16.
const std::vector<std::uint16_t> kBf16Bits = {0x7FC1, 0xFFC0, 0x7F81, 0x7F80, 0xFF80, 0x0001,
                                              0x007F, 0x8000, 0x7F7F, 0x3F80, 0xFF7F, 0x8001};

TensorMap sixteen_bit_tensors() {
  TensorMap t;
  t.emplace("half", HostTensor::from_bits(DType::f16, {3, 4}, kF16Bits));
  t.emplace("brain", HostTensor::from_bits(DType::bf16, {2, 6}, kBf16Bits));
  t.emplace("f32", HostTensor::f32({1}, {1.5F}));
  return t;
}

// The header's JSON and the data after it.
struct Split {
  nlohmann::json header;
  Bytes data;
};
Split split(const Bytes& file) {
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<std::uint64_t>(file.at(i)) << (8 * i);
  return {nlohmann::json::parse(file.begin() + 8, file.begin() + 8 + static_cast<std::ptrdiff_t>(n)),
          Bytes(file.begin() + 8 + static_cast<std::ptrdiff_t>(n), file.end())};
}

std::vector<std::uint16_t> bits_at(const Bytes& data, std::uint64_t begin, std::uint64_t end) {
  std::vector<std::uint16_t> out;
  for (std::uint64_t i = begin; i + 1 < end; i += 2) {
    out.push_back(static_cast<std::uint16_t>(data.at(i) | (data.at(i + 1) << 8)));
  }
  return out;
}

TEST(Safetensors16Bit, WritesF16AndBf16AsTheirOwnLittleEndianBits) {
  const Split file = split(encode_safetensors(sixteen_bit_tensors()));
  const std::pair<const char*, std::pair<const char*, const std::vector<std::uint16_t>*>> want[] = {
      {"half", {"F16", &kF16Bits}}, {"brain", {"BF16", &kBf16Bits}}};
  for (const auto& [name, dtype_and_bits] : want) {
    const nlohmann::json& info = file.header.at(name);
    EXPECT_EQ(info.at("dtype"), dtype_and_bits.first) << name;
    const auto begin = info.at("data_offsets")[0].get<std::uint64_t>();
    const auto end = info.at("data_offsets")[1].get<std::uint64_t>();
    EXPECT_EQ(end - begin, 2 * dtype_and_bits.second->size()) << name << ": two bytes per element";
    EXPECT_EQ(bits_at(file.data, begin, end), *dtype_and_bits.second) << name;
  }
}

TEST(Safetensors16Bit, RoundTripIsBitExact) {
  const TensorMap tensors = sixteen_bit_tensors();
  const std::string path = (fs::temp_directory_path() / ("tg_st16_" + std::to_string(::getpid()))).string();
  save_safetensors(path, tensors);
  const SafetensorsFile file = load_safetensors(path);
  fs::remove(path);
  EXPECT_EQ(file.stored_dtypes.at("half"), "F16");
  EXPECT_EQ(file.stored_dtypes.at("brain"), "BF16");
  for (const char* name : {"half", "brain"}) {
    const HostTensor& got = file.tensors.at(name);
    const HostTensor& want = tensors.at(name);
    EXPECT_EQ(got.type, want.type) << name;
    ASSERT_EQ(got.storage(), want.storage()) << name << " is not kept in 16 bits";
    EXPECT_EQ(std::vector<std::uint16_t>(got.bits16_data().begin(), got.bits16_data().end()),
              std::vector<std::uint16_t>(want.bits16_data().begin(), want.bits16_data().end()))
        << name;
  }
}

// A wide (f64-stored) f16 tensor is rounded to f16 once, from the double: 1 + 2^-11 + 2^-40 lies
// just above the tie between 1 and 1 + 2^-10, so it rounds up; through f32 first it would become
// the tie itself and round to even (down). 1 + 2^-11 is the tie: even, 1.
TEST(Safetensors16Bit, WideSixteenBitTensorsAreRoundedOnceWhenWritten) {
  TensorMap tensors;
  tensors.emplace("w", HostTensor::of({DType::f16, {2}},
                                      {1 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40), 1 + std::ldexp(1.0, -11)}));
  const SafetensorsFile file = decode_safetensors(encode_safetensors(tensors));
  const HostTensor& got = file.tensors.at("w");
  ASSERT_EQ(got.storage(), HostStorage::f16);
  EXPECT_EQ(got.bits16_data()[0], 0x3C01);
  EXPECT_EQ(got.bits16_data()[1], 0x3C00);
}

std::string load_matching_error(const TensorMap& tensors, const std::map<std::string, TensorType>& expected) {
  const std::string path = (fs::temp_directory_path() / ("tg_st16_match_" + std::to_string(::getpid()))).string();
  save_safetensors(path, tensors);
  std::string message = "(no error)";
  try {
    load_matching(path, expected);
  } catch (const SafetensorsError& e) {
    message = e.what();
  }
  fs::remove(path);
  return message;
}

TEST(Safetensors16Bit, LoadingForAParamOfAnotherDtypeNamesTheTensorAndBothDtypes) {
  const TensorMap tensors = sixteen_bit_tensors();
  const std::string message = load_matching_error(
      tensors, {{"half", {DType::f32, {3, 4}}}, {"brain", {DType::f16, {2, 6}}}, {"f32", {DType::f32, {1}}}});
  EXPECT_NE(message.find("'half': expected f32[3,4], found f16[3,4] (stored as F16)"), std::string::npos) << message;
  EXPECT_NE(message.find("'brain': expected f16[2,6], found bf16[2,6] (stored as BF16)"), std::string::npos) << message;
  // Matching dtypes load, bit for bit.
  EXPECT_EQ(
      load_matching_error(
          tensors, {{"half", {DType::f16, {3, 4}}}, {"brain", {DType::bf16, {2, 6}}}, {"f32", {DType::f32, {1}}}}),
      "(no error)");
}

Bytes file_with(const std::string& header, std::size_t data_bytes) {
  Bytes out(8 + header.size() + data_bytes, 0);
  for (std::size_t i = 0; i < 8; ++i) out[i] = static_cast<std::uint8_t>(header.size() >> (8 * i));
  std::copy(header.begin(), header.end(), out.begin() + 8);
  return out;
}

TEST(Safetensors16Bit, ByteLengthsThatAreNotTwoPerElementAreErrorsNamingTheTensor) {
  for (const char* dtype : {"BF16", "F16"}) {
    for (const std::size_t bytes : {std::size_t{3}, std::size_t{5}, std::size_t{12}}) {
      const std::string header = std::string("{\"w.gain\":{\"dtype\":\"") + dtype +
                                 "\",\"shape\":[3],\"data_offsets\":[0," + std::to_string(bytes) + "]}}";
      std::string message = "(no error)";
      try {
        decode_safetensors(file_with(header, bytes), "x.safetensors");
      } catch (const SafetensorsError& e) {
        message = e.what();
      }
      const std::string want = "tensor 'w.gain': data_offsets [0, " + std::to_string(bytes) + "] hold " +
                               std::to_string(bytes) + " bytes, but " + dtype + "[3] needs 6";
      EXPECT_NE(message.find(want), std::string::npos) << "want \"" << want << "\" in: " << message;
    }
  }
}

// cpp_written_16bit.safetensors is what tools/safetensors_interop.py check16 reads back with
// PyTorch (torch.frombuffer of each tensor's bytes as torch.float16 / torch.bfloat16, compared bit
// for bit with the same patterns); our writer must still produce it byte for byte.
// TG_UPDATE_SAFETENSORS_GOLDEN=1 rewrites it (then run the Python check again).
TEST(Safetensors16Bit, WritesTheFileThePyTorchCheckRead) {
  const fs::path golden = kDataDir / "cpp_written_16bit.safetensors";
  if (const char* update = std::getenv("TG_UPDATE_SAFETENSORS_GOLDEN"); update && std::string(update) == "1") {
    save_safetensors(golden.string(), sixteen_bit_tensors(), {{"format", "pt"}});
  }
  std::ifstream in(golden, std::ios::binary);
  const Bytes committed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(encode_safetensors(sixteen_bit_tensors(), {{"format", "pt"}}), committed);
}

}  // namespace
}  // namespace tg
