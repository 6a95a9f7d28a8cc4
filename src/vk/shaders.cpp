// Lookup into the SPIR-V table generated at build time from shaders/*.comp.
#include "tensorgrad/vk/shaders.h"

#include <span>

#include "tensorgrad/ir/error.h"
#include "vk/shader_table.h"

namespace tg::vk {

namespace {
std::span<const detail::EmbeddedShader> table() {
  return {detail::k_embedded_shaders, detail::k_embedded_shader_count};
}
}  // namespace

std::span<const std::uint32_t> shader_spirv(std::string_view name) {
  for (const detail::EmbeddedShader& shader : table()) {
    if (name == shader.name) return {shader.words, shader.word_count};
  }
  std::string known;
  for (const detail::EmbeddedShader& shader : table()) {
    if (!known.empty()) known += ", ";
    known += shader.name;
  }
  throw Error("no embedded shader named '" + std::string(name) + "' (shaders/" + std::string(name) +
              ".comp was not built into the library); embedded shaders: " + known);
}

std::vector<std::string_view> shader_names() {
  std::vector<std::string_view> names;
  for (const detail::EmbeddedShader& shader : table()) names.emplace_back(shader.name);
  return names;
}

}  // namespace tg::vk
