# Included by the top-level CMakeLists.txt when SMELT_STATIC_BUNDLE=ON (scripts/gpu-bundle.sh),
# after find_package(MLIR) and AddMLIR: makes every MLIR/LLVM library link statically, with
# libstdc++/libgcc static too, for binaries that run on the GPU machine without MLIR or LLVM.
# Debian's static MLIR targets link `LLVM` (libLLVM.so): swap it for LLVM's static libraries,
# minus those that drag in other shared libraries (Polly, curl, libedit, libxml2, ffi, pfm).
# Unused archive members are not linked, so listing them all costs link time, not size.
set(smelt_llvm_static ${LLVM_AVAILABLE_LIBS})
list(FILTER smelt_llvm_static INCLUDE REGEX "^LLVM[A-Za-z0-9]+$")
list(FILTER smelt_llvm_static EXCLUDE REGEX
  "^LLVM(Extensions|Debuginfod|Interpreter|LineEditor|WindowsManifest|CFIVerify|Diff|Exegesis.*|OptDriver|BOLT.*|TableGen.*|SupportLSP|FuzzerCLI|FuzzMutate|FileCheck)$")
foreach(target ${MLIR_EXPORTED_TARGETS})
  if(TARGET ${target})
    get_target_property(type ${target} TYPE)
    if(type STREQUAL "STATIC_LIBRARY")
      get_target_property(libs ${target} INTERFACE_LINK_LIBRARIES)
      if(libs AND "LLVM" IN_LIST libs)
        list(TRANSFORM libs REPLACE "^LLVM$" "${smelt_llvm_static}")
        # MLIRExecutionEngine names libMLIR.so too: its static dependencies instead.
        list(TRANSFORM libs REPLACE "^MLIR$" "MLIRBuiltinToLLVMIRTranslation;MLIRExecutionEngineUtils;MLIRLLVMDialect;MLIRLLVMToLLVMIRTranslation;MLIROpenMPToLLVMIRTranslation;MLIRTargetLLVMIRExport")
        set_target_properties(${target} PROPERTIES INTERFACE_LINK_LIBRARIES "${libs}")
      endif()
    endif()
  endif()
endforeach()
# LLVMSupport names libz3.so (only the static analyzer's solver uses it): leave it out; and
# zstd's CMake target, which nothing here defines: the shared library itself (Debian has no
# libzstd.a; the bundle carries libzstd.so.1).
find_library(SMELT_ZSTD_LIBRARY NAMES zstd libzstd.so.1 REQUIRED)
get_target_property(libs LLVMSupport INTERFACE_LINK_LIBRARIES)
list(FILTER libs EXCLUDE REGEX "libz3")
list(TRANSFORM libs REPLACE "^zstd::libzstd_shared$" "${SMELT_ZSTD_LIBRARY}")
set_target_properties(LLVMSupport PROPERTIES INTERFACE_LINK_LIBRARIES "${libs}")
# LLVMExtensions (pulled in by LTO) names Polly, which Debian ships no .a of; nothing here uses it.
set_target_properties(LLVMExtensions PROPERTIES INTERFACE_LINK_LIBRARIES LLVMSupport)
add_link_options(-static-libstdc++ -static-libgcc LINKER:--as-needed LINKER:--gc-sections
  LINKER:--disable-new-dtags)
set(CMAKE_BUILD_RPATH "$ORIGIN/../lib") # an RPATH (not RUNPATH): oneDNN's needs are found too
