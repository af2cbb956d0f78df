# Included by the top-level CMakeLists.txt after find_package(MLIR) and AddMLIR: how Smelt's
# targets link MLIR and LLVM. Two ways, chosen per executable:
#   - libMLIR.so and libLLVM.so (Debian's shared libraries): the default, quick to link, and
#     what the tests and the installed libraries use;
#   - MLIR's and LLVM's static libraries, for an executable whose SMELT_STATIC_MLIR property is
#     ON (the `smelt` tool) and for every target of the static GPU bundle (SMELT_STATIC_BUNDLE).
#     Loading the shared libraries costs a process 72 MiB resident before main: the loader reads
#     their symbol tables for the 40,000 symbols it binds, and their static initializers touch
#     code all over 100 MB of text. Linked statically, only what Smelt calls is there, bound at
#     link time: `smelt --version` peaks at 34 MiB instead of 92 (bench/RESULTS.md).
# smelt_link_mlir(target scope MLIRComponent...) replaces mlir_target_link_libraries.

# Debian's static MLIR targets link `LLVM` (libLLVM.so): swap it for LLVM's static libraries,
# minus those that drag in other shared libraries (Polly, curl, libedit, libxml2, ffi, pfm).
# Unused archive members are not linked, so listing them all costs link time, not size. The
# dynamic link names the `MLIR` target instead and never reads these.
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

# The choice is made where the executable links, not where a library names MLIR: a library's
# link interface holds both, each under a generator expression that reads the executable's
# SMELT_STATIC_MLIR (a target property is read on the consuming target there). One expression
# per component, so that no list sits inside one. An installed Smelt's targets carry the same
# expressions; a user's executable has no such property and links libMLIR.so.
function(smelt_link_mlir target scope)
  if(SMELT_STATIC_BUNDLE)
    target_link_libraries(${target} ${scope} ${ARGN})
    return()
  endif()
  set(static "$<BOOL:$<TARGET_PROPERTY:SMELT_STATIC_MLIR>>")
  set(libs "$<$<NOT:${static}>:MLIR>" "$<$<NOT:${static}>:LLVM>")
  foreach(component ${ARGN})
    list(APPEND libs "$<${static}:${component}>")
  endforeach()
  target_link_libraries(${target} ${scope} ${libs})
endfunction()
