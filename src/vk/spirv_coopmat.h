#pragma once
// Internal: SPIR-V of the matrix-unit matmul (shaders/matmul_coopmat.comp) for the portable
// cooperative matrix extension. The project's shader compiler (glslang 12) compiles only
// GL_NV_cooperative_matrix; VK_KHR_cooperative_matrix is what drivers of several vendors expose and
// the only one with bf16 (VK_KHR_shader_bfloat16). The rewrite is mechanical, done on the words
// when the pipeline is created:
//   - capability CooperativeMatrixNV -> CooperativeMatrixKHR, extension SPV_NV_cooperative_matrix
//     -> SPV_KHR_cooperative_matrix;
//   - OpTypeCooperativeMatrixNV -> OpTypeCooperativeMatrixKHR with a use (the id of a constant, as
//     the sizes are; a literal there crashed NVIDIA's 580 driver): a 16-bit 16x16 type is
//     MatrixA, a 16-bit 16x8 type MatrixB and an f32 16x8 type the Accumulator, both widened to 16
//     columns (the shader declares them 16x8 only to keep the three types distinct, since NV types
//     carry no use; its code is written for 16x16x16);
//   - loads and stores take a layout id (RowMajor 0, ColumnMajor 1) where NV took a bool, before
//     the stride; MulAdd and Length change opcode only;
//   - bf16: OpTypeFloat 16 gains the BFloat16KHR encoding, Float16 becomes BFloat16TypeKHR plus
//     BFloat16CooperativeMatrixKHR, and SPV_KHR_bfloat16 is declared. bf16 allows no arithmetic,
//     so a module with a 16-bit constant or arithmetic on 16-bit values is refused.
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace tg::vk {

enum class CoopmatElement : std::uint8_t { f16, bf16 };

// The module rewritten as above. Throws tg::Error naming what it cannot translate (not SPIR-V,
// a cooperative matrix type of another shape, a bool layout that is not a constant, 16-bit
// arithmetic in a bf16 module).
std::vector<std::uint32_t> nv_coopmat_to_khr(std::span<const std::uint32_t> spirv, CoopmatElement element);

// The embedded shaders written in GL_NV_cooperative_matrix: each runs only as its rewritten
// pipelines, "<module>_f16" and "<module>_bf16".
std::span<const std::string_view> coopmat_modules();

// The pipelines made from a rewritten module: "matmul_coopmat_f16" and "matmul_coopmat_bf16" from
// the embedded "matmul_coopmat", and so on for every coopmat_modules() entry. nullopt for every other name (an embedded
// shader as it is).
std::optional<std::vector<std::uint32_t>> derived_shader_spirv(std::string_view name);

}  // namespace tg::vk
