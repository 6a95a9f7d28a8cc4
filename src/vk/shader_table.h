#pragma once
// The table the generated embedded_shaders.cpp (cmake/embed_shaders.cmake) defines: one entry per
// shaders/*.comp, sorted by name.
#include <cstddef>
#include <cstdint>

namespace tg::vk::detail {

struct EmbeddedShader {
  const char* name;
  const std::uint32_t* words;
  std::size_t word_count;
};

extern const EmbeddedShader k_embedded_shaders[];
extern const std::size_t k_embedded_shader_count;

}  // namespace tg::vk::detail
