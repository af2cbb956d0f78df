# `cmake --install build --prefix P`: Smelt as a package other CMake projects find with
# find_package(Smelt) (README.md, "Using Smelt from your own project"; examples/standalone;
# tests/install checks it). Included last by the top-level CMakeLists.txt, once every target is
# defined. It installs
#   P/include/smelt/  the public headers in the layout users write ("frontend/Graph.h",
#                     "runtime/CpuExecutor.h"), with the tablegen'd .h.inc they include; a
#                     folder of its own, so a prefix such as /usr/local gets no top-level
#                     include/runtime/
#   P/lib/            the static libraries
#   P/bin/            the tools: smelt and smelt-opt
#   P/lib/cmake/Smelt SmeltConfig.cmake, its version file and SmeltTargets.cmake: targets
#                     Smelt::<library without "Smelt">, e.g. Smelt::Runtime, and Smelt::Smelt
# The exported targets carry their own link interfaces (each library names the ones it needs),
# so a consumer links the static libraries in a valid order with no link group.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(SMELT_INSTALL_INCLUDEDIR ${CMAKE_INSTALL_INCLUDEDIR}/smelt)
set(SMELT_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/Smelt)

# --- Libraries and what is exported --------------------------------------------------------
# Always built, in dependency order; then the optional ones this build has (CUDA where the
# toolkit was found, MPI where its C library was).
set(SMELT_EXPORTED_LIBRARIES SmeltRuntime SmeltData SmeltIR SmeltPasses SmeltFrontend
  SmeltCodegenCore SmeltCpuCodegen SmeltCodegen SmeltTrain)
foreach(lib SmeltCudaDriver SmeltCudaLibs SmeltNccl SmeltCudaCodegen SmeltMpi)
  if(TARGET ${lib})
    list(APPEND SMELT_EXPORTED_LIBRARIES ${lib})
  endif()
endforeach()
set(SMELT_COMPONENTS Smelt) # the export names, which SmeltConfig.cmake takes as components
foreach(lib IN LISTS SMELT_EXPORTED_LIBRARIES)
  string(REGEX REPLACE "^Smelt" "" exportName ${lib}) # SmeltRuntime -> Smelt::Runtime
  set_target_properties(${lib} PROPERTIES EXPORT_NAME ${exportName})
  list(APPEND SMELT_COMPONENTS ${exportName})
  # The public headers use C++20; a consumer compiles them in at least that.
  target_compile_features(${lib} INTERFACE cxx_std_20)
endforeach()

# Smelt::Smelt: what a program that builds, JIT-compiles and trains a model links (the builder,
# codegen with its back ends, the trainer, the data formats, and the runtime under them).
add_library(SmeltAll INTERFACE)
set_target_properties(SmeltAll PROPERTIES EXPORT_NAME Smelt)
target_link_libraries(SmeltAll INTERFACE SmeltFrontend SmeltCodegen SmeltTrain SmeltData)

install(TARGETS ${SMELT_EXPORTED_LIBRARIES} SmeltAll EXPORT SmeltTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${SMELT_INSTALL_INCLUDEDIR})

# --- Tools -------------------------------------------------------------------------------
# LLVM's executables get an install RPATH of $ORIGIN/../lib only; Smelt's tools also need
# libMLIR/libLLVM where they were linked from, which are not in the prefix.
# They are built with that RPATH too: were the build's shorter, CMake's in-place RPATH editor
# would pad it with empty entries to make room for the install's, and the loader reads an
# empty entry as the current directory (a libz.so.1 where a user runs build/bin/smelt would
# load into it). tests/tools/check_runpath.py reads every built and installed binary for them.
set_target_properties(smelt smelt-opt PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON
                                                 BUILD_WITH_INSTALL_RPATH ON)
install(TARGETS smelt smelt-opt RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# --- Headers -----------------------------------------------------------------------------
# Every library's headers; the CUDA and MPI ones only where those libraries were built.
set(SMELT_HEADER_EXCLUDES)
if(NOT TARGET SmeltCudaDriver)
  list(APPEND SMELT_HEADER_EXCLUDES PATTERN runtime/cuda EXCLUDE)
endif()
if(NOT TARGET SmeltMpi)
  list(APPEND SMELT_HEADER_EXCLUDES PATTERN runtime/mpi EXCLUDE)
endif()
if(NOT TARGET SmeltCudaCodegen)
  list(APPEND SMELT_HEADER_EXCLUDES PATTERN codegen/cuda EXCLUDE)
endif()
foreach(dir runtime data ir passes frontend codegen train)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir} DESTINATION ${SMELT_INSTALL_INCLUDEDIR}
    FILES_MATCHING PATTERN "*.h" ${SMELT_HEADER_EXCLUDES})
endforeach()
# The tablegen'd declarations the ir/ and passes/ headers include (ir/CMakeLists.txt and
# passes/CMakeLists.txt make them); the .cpp.inc definitions are compiled into the libraries.
install(FILES
  ${PROJECT_BINARY_DIR}/ir/SmeltOps.h.inc
  ${PROJECT_BINARY_DIR}/ir/SmeltDialect.h.inc
  ${PROJECT_BINARY_DIR}/ir/SmeltEnums.h.inc
  ${PROJECT_BINARY_DIR}/ir/SmeltInterfaces.h.inc
  DESTINATION ${SMELT_INSTALL_INCLUDEDIR}/ir)
install(FILES ${PROJECT_BINARY_DIR}/passes/Passes.h.inc
  DESTINATION ${SMELT_INSTALL_INCLUDEDIR}/passes)

# --- The CMake package ---------------------------------------------------------------------
# SmeltConfig.cmake finds what the exported targets name, as this build found it: these say
# which optional parts it has.
if(TARGET SmeltCudaDriver)
  set(SMELT_WITH_CUDA ON)
else()
  set(SMELT_WITH_CUDA OFF)
endif()
if(TARGET SmeltMpi)
  set(SMELT_WITH_MPI ON)
else()
  set(SMELT_WITH_MPI OFF)
endif()

install(EXPORT SmeltTargets NAMESPACE Smelt:: DESTINATION ${SMELT_INSTALL_CMAKEDIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/SmeltConfig.cmake.in
  ${PROJECT_BINARY_DIR}/SmeltConfig.cmake INSTALL_DESTINATION ${SMELT_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/SmeltConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/SmeltConfig.cmake ${PROJECT_BINARY_DIR}/SmeltConfigVersion.cmake
  DESTINATION ${SMELT_INSTALL_CMAKEDIR})
