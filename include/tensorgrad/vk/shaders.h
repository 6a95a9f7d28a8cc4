#pragma once
// The compute shaders built into the library: shaders/<name>.comp, compiled to SPIR-V at build time
// and embedded as uint32 words, so the library needs no shader files at run time.
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace tg::vk {

// The SPIR-V words of the embedded shader `name` (the .comp file's stem). Throws tg::Error naming
// the known shaders if there is none by that name.
std::span<const std::uint32_t> shader_spirv(std::string_view name);

// Every embedded shader's name, sorted.
std::vector<std::string_view> shader_names();

}  // namespace tg::vk
