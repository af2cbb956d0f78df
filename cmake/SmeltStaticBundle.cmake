# Included by the top-level CMakeLists.txt when SMELT_STATIC_BUNDLE=ON (scripts/gpu-bundle.sh),
# after cmake/SmeltStaticLLVM.cmake, which links every target's MLIR and LLVM statically in
# this configuration: libstdc++ and libgcc static too, for binaries that run on the GPU machine
# without MLIR or LLVM.
add_link_options(-static-libstdc++ -static-libgcc LINKER:--as-needed LINKER:--gc-sections
  LINKER:--disable-new-dtags)
set(CMAKE_BUILD_RPATH "$ORIGIN/../lib") # an RPATH (not RUNPATH): oneDNN's needs are found too
