// SPIR-V float controls: see spirv_float_controls.h. A module is a 5-word header, then
// instructions, each `word count << 16 | opcode` followed by its operands, in a fixed section
// order: capabilities, extensions, imports, the memory model, entry points, execution modes, ...
// The new capabilities go after the last OpCapability, the extension after the last OpExtension
// (or the capabilities), the execution modes after the last OpEntryPoint / OpExecutionMode.
#include "vk/spirv_float_controls.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "tensorgrad/ir/error.h"

namespace tg::vk {

namespace {

constexpr std::uint32_t kMagic = 0x07230203;
constexpr std::size_t kHeaderWords = 5;
// Opcodes, capabilities and execution modes from the SPIR-V specification (unified registry).
constexpr std::uint32_t kOpExtension = 10;
constexpr std::uint32_t kOpEntryPoint = 15;
constexpr std::uint32_t kOpExecutionMode = 16;
constexpr std::uint32_t kOpCapability = 17;
constexpr std::uint32_t kCapabilityDenormPreserve = 4464;
constexpr std::uint32_t kCapabilitySignedZeroInfNanPreserve = 4466;
constexpr std::uint32_t kModeDenormPreserve = 4459;
constexpr std::uint32_t kModeSignedZeroInfNanPreserve = 4461;
constexpr char kExtension[] = "SPV_KHR_float_controls";

std::uint32_t instruction(std::uint32_t opcode, std::size_t words) {
  return static_cast<std::uint32_t>(words << 16) | opcode;
}

// The extension's name as a nul-terminated literal string in whole words.
std::vector<std::uint32_t> literal_string(const char* text) {
  const std::size_t bytes = std::strlen(text) + 1;
  std::vector<std::uint32_t> words((bytes + 3) / 4, 0);
  std::memcpy(words.data(), text, bytes);
  return words;
}

}  // namespace

std::vector<std::uint32_t> with_float_controls(std::span<const std::uint32_t> spirv, FloatControls controls) {
  if (spirv.size() < kHeaderWords || spirv[0] != kMagic) throw Error("float controls: not a SPIR-V module");
  std::vector<std::uint32_t> out(spirv.begin(), spirv.end());
  if (!controls.any()) return out;

  // One pass over the instructions: where each section ends, what is there already.
  std::size_t after_capabilities = kHeaderWords, after_extensions = 0, after_modes = 0;
  std::vector<std::uint32_t> capabilities, entry_points;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> modes;  // (entry point, mode)
  bool has_extension = false;
  const std::vector<std::uint32_t> extension_name = literal_string(kExtension);
  for (std::size_t at = kHeaderWords; at < out.size();) {
    const std::uint32_t opcode = out[at] & 0xffffu;
    const std::size_t count = out[at] >> 16;
    if (count == 0 || at + count > out.size()) throw Error("float controls: a malformed SPIR-V instruction");
    const std::size_t next = at + count;
    if (opcode == kOpCapability && count == 2) {
      capabilities.push_back(out[at + 1]);
      after_capabilities = next;
    } else if (opcode == kOpExtension) {
      has_extension = has_extension || std::equal(extension_name.begin(), extension_name.end(), out.begin() + at + 1,
                                                  out.begin() + next);
      after_extensions = next;
    } else if (opcode == kOpEntryPoint && count >= 3) {
      entry_points.push_back(out[at + 2]);
      after_modes = next;
    } else if (opcode == kOpExecutionMode && count >= 3) {
      modes.emplace_back(out[at + 1], out[at + 2]);
      after_modes = next;
    }
    at = next;
  }
  if (entry_points.empty()) throw Error("float controls: the SPIR-V module has no entry point");
  if (after_extensions == 0) after_extensions = after_capabilities;

  std::vector<std::uint32_t> new_capabilities, new_modes;
  const auto want = [&](bool on, std::uint32_t capability, std::uint32_t mode) {
    if (!on) return;
    if (std::find(capabilities.begin(), capabilities.end(), capability) == capabilities.end()) {
      new_capabilities.insert(new_capabilities.end(), {instruction(kOpCapability, 2), capability});
    }
    for (std::uint32_t entry : entry_points) {
      if (std::find(modes.begin(), modes.end(), std::pair{entry, mode}) != modes.end()) continue;
      new_modes.insert(new_modes.end(), {instruction(kOpExecutionMode, 4), entry, mode, 32u});
    }
  };
  want(controls.preserve_nan_inf_signed_zero, kCapabilitySignedZeroInfNanPreserve, kModeSignedZeroInfNanPreserve);
  want(controls.preserve_denormals, kCapabilityDenormPreserve, kModeDenormPreserve);
  std::vector<std::uint32_t> new_extension;
  if (!has_extension) {
    new_extension.push_back(instruction(kOpExtension, 1 + extension_name.size()));
    new_extension.insert(new_extension.end(), extension_name.begin(), extension_name.end());
  }
  // Insert from the back, so the earlier positions stay valid.
  out.insert(out.begin() + static_cast<std::ptrdiff_t>(after_modes), new_modes.begin(), new_modes.end());
  out.insert(out.begin() + static_cast<std::ptrdiff_t>(after_extensions), new_extension.begin(), new_extension.end());
  out.insert(out.begin() + static_cast<std::ptrdiff_t>(after_capabilities), new_capabilities.begin(),
             new_capabilities.end());
  return out;
}

}  // namespace tg::vk
