// NV -> KHR cooperative matrix SPIR-V: see spirv_coopmat.h. The module is split into instructions
// (word count << 16 | opcode, then operands), each rewritten on its own, with the few constants
// the KHR form needs (the layouts 0 and 1, the column count 16) added after the 32-bit unsigned
// integer type, and the id bound raised for them.
#include "vk/spirv_coopmat.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <utility>

#include "tensorgrad/ir/error.h"
#include "tensorgrad/vk/shaders.h"

namespace tg::vk {

namespace {

constexpr std::uint32_t kMagic = 0x07230203;
constexpr std::size_t kHeaderWords = 5;
// From the SPIR-V unified registry.
constexpr std::uint32_t kOpExtension = 10;
constexpr std::uint32_t kOpCapability = 17;
constexpr std::uint32_t kOpTypeInt = 21;
constexpr std::uint32_t kOpTypeFloat = 22;
constexpr std::uint32_t kOpConstantTrue = 41;
constexpr std::uint32_t kOpConstantFalse = 42;
constexpr std::uint32_t kOpConstant = 43;
constexpr std::uint32_t kOpTypeCooperativeMatrixNV = 5358;
constexpr std::uint32_t kOpCooperativeMatrixLoadNV = 5359;
constexpr std::uint32_t kOpCooperativeMatrixStoreNV = 5360;
constexpr std::uint32_t kOpCooperativeMatrixMulAddNV = 5361;
constexpr std::uint32_t kOpCooperativeMatrixLengthNV = 5362;
constexpr std::uint32_t kOpTypeCooperativeMatrixKHR = 4456;
constexpr std::uint32_t kOpCooperativeMatrixLoadKHR = 4457;
constexpr std::uint32_t kOpCooperativeMatrixStoreKHR = 4458;
constexpr std::uint32_t kOpCooperativeMatrixMulAddKHR = 4459;
constexpr std::uint32_t kOpCooperativeMatrixLengthKHR = 4460;
constexpr std::uint32_t kCapabilityFloat16 = 9;
constexpr std::uint32_t kCapabilityCooperativeMatrixNV = 5357;
constexpr std::uint32_t kCapabilityCooperativeMatrixKHR = 6022;
constexpr std::uint32_t kCapabilityBFloat16TypeKHR = 5116;
constexpr std::uint32_t kCapabilityBFloat16CooperativeMatrixKHR = 5118;
constexpr std::uint32_t kEncodingBFloat16KHR = 0;
constexpr std::uint32_t kUseMatrixA = 0;
constexpr std::uint32_t kUseMatrixB = 1;
constexpr std::uint32_t kUseAccumulator = 2;
// Opcodes that compute on floats (OpFNegate .. OpFMod, OpVectorTimesScalar, OpDot, the ordered and
// unordered comparisons): none may have a bf16 operand or result.
constexpr std::uint32_t kFloatArithmetic[] = {127, 129, 131, 133, 136, 140, 141, 142, 148, 180, 181,
                                              182, 183, 184, 185, 186, 187, 188, 189, 190, 191};

using Instruction = std::vector<std::uint32_t>;

std::uint32_t opcode_of(const Instruction& in) { return in[0] & 0xffffu; }
void set_opcode(Instruction& in, std::uint32_t opcode) { in[0] = static_cast<std::uint32_t>(in.size() << 16) | opcode; }

Instruction literal_string(std::uint32_t opcode, const char* text) {
  const std::size_t bytes = std::strlen(text) + 1;
  Instruction in(1 + (bytes + 3) / 4, 0);
  std::memcpy(in.data() + 1, text, bytes);
  set_opcode(in, opcode);
  return in;
}

std::string string_operand(const Instruction& in) {
  const std::size_t bytes = (in.size() - 1) * 4;
  std::string text(reinterpret_cast<const char*>(in.data() + 1), bytes);
  return text.substr(0, text.find('\0'));
}

[[noreturn]] void refuse(const std::string& what) { throw Error("cooperative matrix SPIR-V rewrite: " + what); }

}  // namespace

std::vector<std::uint32_t> nv_coopmat_to_khr(std::span<const std::uint32_t> spirv, CoopmatElement element) {
  if (spirv.size() < kHeaderWords || spirv[0] != kMagic) refuse("not a SPIR-V module");
  std::vector<Instruction> ins;
  for (std::size_t at = kHeaderWords; at < spirv.size();) {
    const std::size_t count = spirv[at] >> 16;
    if (count == 0 || at + count > spirv.size()) refuse("a malformed instruction at word " + std::to_string(at));
    ins.emplace_back(spirv.begin() + static_cast<std::ptrdiff_t>(at),
                     spirv.begin() + static_cast<std::ptrdiff_t>(at + count));
    at += count;
  }
  std::uint32_t bound = spirv[3];
  const bool bf16 = element == CoopmatElement::bf16;

  // What the types and constants are.
  std::optional<std::uint32_t> uint_type, half_type, float_type, true_id, false_id;
  std::map<std::uint32_t, std::uint32_t> uint_constant_ids;     // value -> id
  std::map<std::uint32_t, std::uint32_t> uint_constant_values;  // id -> value
  for (const Instruction& in : ins) {
    const std::uint32_t op = opcode_of(in);
    if (op == kOpTypeInt && in.size() == 4 && in[2] == 32 && in[3] == 0) uint_type = in[1];
    if (op == kOpTypeFloat && in.size() >= 3 && in[2] == 16) half_type = in[1];
    if (op == kOpTypeFloat && in.size() >= 3 && in[2] == 32) float_type = in[1];
    if (op == kOpConstantTrue) true_id = in[2];
    if (op == kOpConstantFalse) false_id = in[2];
    if (op == kOpConstant && in.size() == 4 && uint_type && in[1] == *uint_type) {
      uint_constant_ids.emplace(in[3], in[2]);
      uint_constant_values.emplace(in[2], in[3]);
    }
  }
  if (!uint_type) refuse("the module declares no 32-bit unsigned integer type");
  if (!half_type || !float_type) refuse("the module declares no 16-bit or no 32-bit float type");
  std::vector<Instruction> new_constants;
  const auto uint_constant = [&](std::uint32_t value) {
    if (auto it = uint_constant_ids.find(value); it != uint_constant_ids.end()) return it->second;
    const std::uint32_t id = bound++;
    Instruction c{0, *uint_type, id, value};
    set_opcode(c, kOpConstant);
    new_constants.push_back(c);
    uint_constant_ids.emplace(value, id);
    uint_constant_values.emplace(id, value);
    return id;
  };
  const auto layout_of = [&](std::uint32_t column_major) {
    if (true_id && column_major == *true_id) return uint_constant(1);
    if (false_id && column_major == *false_id) return uint_constant(0);
    refuse("a load or store whose column-major operand is not a constant bool");
  };
  const auto constant_value = [&](std::uint32_t id) {
    const auto it = uint_constant_values.find(id);
    if (it == uint_constant_values.end()) refuse("a cooperative matrix type whose size is not a uint constant");
    return it->second;
  };

  std::vector<Instruction> out;
  std::size_t after_uint_type = 0;
  bool added_bf16_capability = false;
  for (Instruction in : ins) {
    const std::uint32_t op = opcode_of(in);
    if (bf16) {
      if (op == kOpConstant && in[1] == *half_type) refuse("a 16-bit float constant (bf16 has no constants here)");
      if (std::find(std::begin(kFloatArithmetic), std::end(kFloatArithmetic), op) != std::end(kFloatArithmetic) &&
          in.size() >= 2 && in[1] == *half_type) {
        refuse("arithmetic on 16-bit floats (opcode " + std::to_string(op) + "), which bf16 does not allow");
      }
    }
    switch (op) {
      case kOpCapability:
        if (in[1] == kCapabilityCooperativeMatrixNV) in[1] = kCapabilityCooperativeMatrixKHR;
        if (bf16 && in[1] == kCapabilityFloat16) {
          in[1] = kCapabilityBFloat16TypeKHR;
          out.push_back(in);
          in[1] = kCapabilityBFloat16CooperativeMatrixKHR;
          added_bf16_capability = true;
        }
        break;
      case kOpExtension:
        if (string_operand(in) == "SPV_NV_cooperative_matrix") {
          in = literal_string(kOpExtension, "SPV_KHR_cooperative_matrix");
          if (bf16) {
            out.push_back(in);
            in = literal_string(kOpExtension, "SPV_KHR_bfloat16");
          }
        }
        break;
      case kOpTypeFloat:
        if (bf16 && in[2] == 16) {
          in.resize(3);
          in.push_back(kEncodingBFloat16KHR);
          set_opcode(in, kOpTypeFloat);
        }
        break;
      case kOpTypeCooperativeMatrixNV: {
        // result, component type, scope, rows, columns
        const std::uint32_t rows = constant_value(in[4]);
        const std::uint32_t columns = constant_value(in[5]);
        std::uint32_t use = 0;
        if (in[2] == *half_type && rows == 16 && columns == 16) {
          use = kUseMatrixA;
        } else if (in[2] == *half_type && rows == 16 && columns == 8) {
          use = kUseMatrixB;
        } else if (in[2] == *float_type && rows == 16 && columns == 8) {
          use = kUseAccumulator;
        } else {
          refuse("a cooperative matrix type of " + std::to_string(rows) + "x" + std::to_string(columns) +
                 " (the shader's are 16-bit 16x16 A, 16-bit 16x8 B and f32 16x8 accumulators)");
        }
        in[5] = uint_constant(16);
        in.push_back(uint_constant(use));  // the use is an id of a constant, like the sizes
        set_opcode(in, kOpTypeCooperativeMatrixKHR);
        break;
      }
      case kOpCooperativeMatrixLoadNV: {
        // result type, result, pointer, stride, column major, [memory access...]
        Instruction k{0, in[1], in[2], in[3], layout_of(in[5]), in[4]};
        k.insert(k.end(), in.begin() + 6, in.end());
        set_opcode(k, kOpCooperativeMatrixLoadKHR);
        in = k;
        break;
      }
      case kOpCooperativeMatrixStoreNV: {
        // pointer, object, stride, column major, [memory access...]
        Instruction k{0, in[1], in[2], layout_of(in[4]), in[3]};
        k.insert(k.end(), in.begin() + 5, in.end());
        set_opcode(k, kOpCooperativeMatrixStoreKHR);
        in = k;
        break;
      }
      case kOpCooperativeMatrixMulAddNV:
        set_opcode(in, kOpCooperativeMatrixMulAddKHR);
        break;
      case kOpCooperativeMatrixLengthNV:
        set_opcode(in, kOpCooperativeMatrixLengthKHR);
        break;
      default:
        break;
    }
    out.push_back(std::move(in));
    if (op == kOpTypeInt && out.back()[1] == *uint_type) after_uint_type = out.size();
  }
  if (bf16 && !added_bf16_capability) refuse("the module does not declare the Float16 capability");

  std::vector<std::uint32_t> words(spirv.begin(), spirv.begin() + kHeaderWords);
  words[3] = bound;
  for (std::size_t i = 0; i < out.size(); ++i) {
    words.insert(words.end(), out[i].begin(), out[i].end());
    if (i + 1 == after_uint_type) {
      for (const Instruction& c : new_constants) words.insert(words.end(), c.begin(), c.end());
    }
  }
  return words;
}

std::span<const std::string_view> coopmat_modules() {
  static constexpr std::string_view kModules[] = {"matmul_coopmat", "attention_coopmat", "attention_coopmat_grad_q",
                                                  "attention_coopmat_grad_kv", "conv2d_coopmat"};
  return kModules;
}

std::optional<std::vector<std::uint32_t>> derived_shader_spirv(std::string_view name) {
  for (const auto& [suffix, element] : {std::pair<std::string_view, CoopmatElement>{"_f16", CoopmatElement::f16},
                                        std::pair<std::string_view, CoopmatElement>{"_bf16", CoopmatElement::bf16}}) {
    if (name.size() <= suffix.size() || name.substr(name.size() - suffix.size()) != suffix) continue;
    const std::string_view base = name.substr(0, name.size() - suffix.size());
    for (std::string_view module : coopmat_modules()) {
      if (module == base) return nv_coopmat_to_khr(shader_spirv(base), element);
    }
  }
  return std::nullopt;
}

}  // namespace tg::vk
