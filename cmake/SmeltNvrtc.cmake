# libnvrtc as the imported target Smelt::nvrtc: whether the CUDA back end (codegen/cuda) is built
# (it opens NVRTC with dlopen at run time, and its tests need one), and what the emulated
# driver's tests link to compile a CUBIN. Expects find_package(CUDAToolkit) first. By path, not CUDA::nvrtc: that target also links
# CUDA::cuda_driver, and on build machines libcuda is only a stub that no binary may load (the
# driver is opened with dlopen at run time).
find_library(SMELT_NVRTC_LIBRARY nvrtc HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
if(SMELT_NVRTC_LIBRARY AND NOT TARGET Smelt::nvrtc)
  add_library(Smelt::nvrtc UNKNOWN IMPORTED GLOBAL)
  set_target_properties(Smelt::nvrtc PROPERTIES IMPORTED_LOCATION "${SMELT_NVRTC_LIBRARY}")
endif()
