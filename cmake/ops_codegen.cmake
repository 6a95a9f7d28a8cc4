# Runs cmake/generate_ops.cmake (the headers derived from ops.def) once at configure time, so the
# files exist before anything compiles, and again at build time whenever ops.def or the generator
# changes. Included by the top-level CMakeLists.txt and by fuzz/CMakeLists.txt (a project of its own).
#   TG_OPS_ROOT          the source root (where include/tensorgrad/ir/ops/ops.def is)
#   TG_GENERATED_DIR     where the files go: include/ (public headers), private/ (src/ headers),
#                        shaders/ (GLSL includes)
# Defines the target tg_generated_ops; a target that compiles anything including them depends on it.
set(TG_GENERATED_DIR ${PROJECT_BINARY_DIR}/generated)
set(_tg_ops_def ${TG_OPS_ROOT}/include/tensorgrad/ir/ops/ops.def)
set(_tg_ops_generator ${TG_OPS_ROOT}/cmake/generate_ops.cmake)
execute_process(COMMAND ${CMAKE_COMMAND} -DTG_OPS_DEF=${_tg_ops_def} -DTG_OUT=${TG_GENERATED_DIR}
                        -P ${_tg_ops_generator}
                RESULT_VARIABLE _tg_ops_result)
if(NOT _tg_ops_result EQUAL 0)
  message(FATAL_ERROR "generating the op headers from ops.def failed (see above)")
endif()
# The stamp is the only declared output: the headers themselves are rewritten only when their text
# changes, and compilers' dependency files track them from there.
add_custom_command(
  OUTPUT ${TG_GENERATED_DIR}/ops.stamp
  COMMAND ${CMAKE_COMMAND} -DTG_OPS_DEF=${_tg_ops_def} -DTG_OUT=${TG_GENERATED_DIR} -P ${_tg_ops_generator}
  COMMAND ${CMAKE_COMMAND} -E touch ${TG_GENERATED_DIR}/ops.stamp
  DEPENDS ${_tg_ops_def} ${_tg_ops_generator}
  COMMENT "Generating the op headers from ops.def"
  VERBATIM)
add_custom_target(tg_generated_ops DEPENDS ${TG_GENERATED_DIR}/ops.stamp)
