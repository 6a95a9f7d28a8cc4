# The Vulkan layer (src/vk) of the tensorgrad library: its sources, and shaders/*.comp compiled to
# SPIR-V by glslangValidator at build time and embedded in the library as uint32 arrays
# (cmake/embed_shaders.cmake). Included from the top-level CMakeLists.txt after the library target.

file(GLOB TG_VK_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/vk/*.cpp ${PROJECT_SOURCE_DIR}/src/vk/kernels/*.cpp)
file(GLOB TG_SHADER_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/shaders/*.comp)

set(TG_SHADER_DIR ${PROJECT_BINARY_DIR}/shaders)
set(TG_SPV_FILES "")
foreach(shader IN LISTS TG_SHADER_SOURCES)
  get_filename_component(name ${shader} NAME_WE)
  set(spv ${TG_SHADER_DIR}/${name}.spv)
  # Vulkan 1.1 SPIR-V (1.3) is what every device we accept runs; the depfile tracks #includes.
  add_custom_command(
    OUTPUT ${spv}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${TG_SHADER_DIR}
    COMMAND ${Vulkan_GLSLANG_VALIDATOR_EXECUTABLE} --target-env vulkan1.1 -S comp
            -I${TG_GENERATED_DIR}/shaders --depfile ${spv}.d -o ${spv} ${shader}
    MAIN_DEPENDENCY ${shader}
    DEPENDS tg_generated_ops
    DEPFILE ${spv}.d
    COMMENT "Compiling shader ${name}.comp to SPIR-V"
    VERBATIM)
  list(APPEND TG_SPV_FILES ${spv})
endforeach()

list(LENGTH TG_SPV_FILES tg_shader_count)
set(TG_EMBEDDED_SHADERS_CPP ${TG_SHADER_DIR}/embedded_shaders.cpp)
string(REPLACE ";" "|" tg_spv_arg "${TG_SPV_FILES}")
add_custom_command(
  OUTPUT ${TG_EMBEDDED_SHADERS_CPP}
  COMMAND ${CMAKE_COMMAND} "-DTG_SPV_FILES=${tg_spv_arg}" "-DTG_OUTPUT=${TG_EMBEDDED_SHADERS_CPP}"
          -P ${PROJECT_SOURCE_DIR}/cmake/embed_shaders.cmake
  DEPENDS ${TG_SPV_FILES} ${PROJECT_SOURCE_DIR}/cmake/embed_shaders.cmake
  COMMENT "Embedding the SPIR-V of ${tg_shader_count} shaders"
  VERBATIM)

target_sources(tensorgrad PRIVATE ${TG_VK_SOURCES} ${TG_EMBEDDED_SHADERS_CPP})
# The public vk headers include <vulkan/vulkan.h>, so consumers need the Vulkan headers and loader.
target_link_libraries(tensorgrad PUBLIC Vulkan::Vulkan)
