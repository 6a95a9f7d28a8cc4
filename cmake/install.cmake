# Install and export: headers, the static library and a package config, so a consumer can write
#   find_package(tensorgrad REQUIRED)
#   target_link_libraries(app PRIVATE tensorgrad::tensorgrad)
# tests/install checks exactly that against a temporary prefix.
include(CMakePackageConfigHelpers)

set(TG_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/tensorgrad CACHE STRING
    "Where tensorgradConfig.cmake is installed, relative to the prefix")
# Packages the installed config looks up with find_dependency before loading the targets. A layer
# that links a new package PUBLICly (or privately: the library is static, e.g. Vulkan) appends it
# here with list(APPEND TG_EXPORTED_DEPENDENCIES ...) in the top-level scope.
set(TG_EXPORTED_DEPENDENCIES TBB)

set_target_properties(tensorgrad PROPERTIES EXPORT_NAME tensorgrad)
install(TARGETS tensorgrad
  EXPORT tensorgradTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The whole public tree, and the headers generated from ops.def (the tg::op constants and the
# front-end functions declared there). Not distributed/: its library, tensorgrad_mpi, is not
# installed, and its header needs <mpi.h>.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/tensorgrad DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        PATTERN "ops.def" EXCLUDE PATTERN "distributed" EXCLUDE)
install(DIRECTORY ${TG_GENERATED_DIR}/include/tensorgrad DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

install(EXPORT tensorgradTargets
  NAMESPACE tensorgrad::
  FILE tensorgradTargets.cmake
  DESTINATION ${TG_INSTALL_CMAKEDIR})

# The dependency list is spliced into the config when it is generated (at the end of configure, so
# layers configured after this file can still append).
cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL _tg_write_package_config)
function(_tg_write_package_config)
  set(TG_FIND_DEPENDENCIES "")
  foreach(dep IN LISTS TG_EXPORTED_DEPENDENCIES)
    string(APPEND TG_FIND_DEPENDENCIES "find_dependency(${dep})\n")
  endforeach()
  configure_package_config_file(
    ${PROJECT_SOURCE_DIR}/cmake/tensorgradConfig.cmake.in
    ${PROJECT_BINARY_DIR}/tensorgradConfig.cmake
    INSTALL_DESTINATION ${TG_INSTALL_CMAKEDIR})
endfunction()

# 0.x: only the same minor version is compatible.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tensorgradConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)

install(FILES
  ${PROJECT_BINARY_DIR}/tensorgradConfig.cmake
  ${PROJECT_BINARY_DIR}/tensorgradConfigVersion.cmake
  DESTINATION ${TG_INSTALL_CMAKEDIR})

# The `tg` command-line tool (tools/tg) into <prefix>/bin, exported as tensorgrad::tg so a consumer
# can find it through the package too. Deferred to the end of configure: tools/tg is added after
# this file.
cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL _tg_install_tool)
function(_tg_install_tool)
  install(TARGETS tg EXPORT tensorgradTargets RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endfunction()
