# The CUDA backend's kernels, compiled into nanovllm_backend_cuda when nvcc is found (or -DNANOVLLM_CUDA=ON);
# -DNANOVLLM_CUDA=OFF forces a CPU-only build. Included from src/nanovllm/CMakeLists.txt.
# Architectures: CMAKE_CUDA_ARCHITECTURES, default "80;90a" (A100 and H100/H200), or $CUDAARCHS.
include(CheckLanguage)
if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
  find_program(NANOVLLM_NVCC nvcc)
  if(NOT NANOVLLM_NVCC AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "CUDA compiler")
  endif()
endif()
if(NOT DEFINED NANOVLLM_CUDA OR NANOVLLM_CUDA)
  check_language(CUDA)
endif()
set(_nanovllm_cuda_default OFF)
if(CMAKE_CUDA_COMPILER)
  set(_nanovllm_cuda_default ON)
endif()
option(NANOVLLM_CUDA "Build the CUDA backend" ${_nanovllm_cuda_default})
if(NANOVLLM_CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    message(FATAL_ERROR "NANOVLLM_CUDA=ON but no CUDA compiler was found (set CMAKE_CUDA_COMPILER)")
  endif()
  # CMake's CUDAARCHS environment variable, when set, is the default instead: CI (.ci/run) sets
  # 90a-virtual, PTX without SASS, which checks that the CUDA code compiles at a fraction of the
  # time (no ptxas: ~4x faster) since no GPU runs it there.
  if((NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "") AND "$ENV{CUDAARCHS}" STREQUAL "")
    set(CMAKE_CUDA_ARCHITECTURES "80;90a" CACHE STRING "CUDA architectures" FORCE)
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  file(GLOB NANOVLLM_CUDA_SRC CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*.cu)
  # An object library: nvcc gets its own flags (the libraries' -Wall is gcc's); the objects go into
  # nanovllm_backend_cuda.
  add_library(nanovllm_cuda_objs OBJECT ${NANOVLLM_CUDA_SRC})
  set_target_properties(nanovllm_cuda_objs PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON CUDA_EXTENSIONS OFF
    POSITION_INDEPENDENT_CODE ON)
  target_include_directories(nanovllm_cuda_objs PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(nanovllm_cuda_objs PRIVATE CUDA::cudart CUDA::cublasLt)
  target_compile_options(nanovllm_cuda_objs PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -Xcompiler=-Wall>)
  target_sources(nanovllm_backend_cuda PRIVATE $<TARGET_OBJECTS:nanovllm_cuda_objs>)
  target_link_libraries(nanovllm_backend_cuda PUBLIC CUDA::cudart CUDA::cublasLt)
  target_compile_definitions(nanovllm_backend_cuda PUBLIC NANOVLLM_WITH_CUDA)
  message(STATUS "nanovllm: CUDA backend ON (architectures ${CMAKE_CUDA_ARCHITECTURES})")

  # NCCL for tensor parallelism: the CUDA toolkit's, NCCL_ROOT's, or the one a PyTorch venv carries
  # (the GPU machine's only copy, libnccl.so.2 without the unversioned link). Without it, TP on CUDA
  # is refused at run time (backends/cuda/no_cuda.cpp).
  set(_nccl_hints ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_LIBRARY_ROOT} /usr/local/cuda
      /opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl)
  find_path(NANOVLLM_NCCL_INCLUDE nccl.h HINTS ${_nccl_hints} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
  find_library(NANOVLLM_NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${_nccl_hints} PATH_SUFFIXES lib lib64)
  if(NANOVLLM_NCCL_INCLUDE AND NANOVLLM_NCCL_LIBRARY)
    add_library(nanovllm_nccl_objs OBJECT ${CMAKE_CURRENT_LIST_DIR}/collectives/nccl_communicator.cu
                ${CMAKE_CURRENT_LIST_DIR}/collectives/p2p_all_reduce.cu
                ${CMAKE_CURRENT_LIST_DIR}/collectives/p2p_all_reduce_norm.cu)
    set_target_properties(nanovllm_nccl_objs PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON
      CUDA_EXTENSIONS OFF POSITION_INDEPENDENT_CODE ON)
    target_include_directories(nanovllm_nccl_objs PRIVATE ${PROJECT_SOURCE_DIR}/src ${NANOVLLM_NCCL_INCLUDE})
    target_link_libraries(nanovllm_nccl_objs PRIVATE CUDA::cudart)
    target_sources(nanovllm_backend_cuda PRIVATE $<TARGET_OBJECTS:nanovllm_nccl_objs>)
    target_link_libraries(nanovllm_backend_cuda PUBLIC ${NANOVLLM_NCCL_LIBRARY})
    target_compile_definitions(nanovllm_backend_cuda PUBLIC NANOVLLM_WITH_NCCL)
    message(STATUS "nanovllm: NCCL ${NANOVLLM_NCCL_LIBRARY}")
  else()
    message(STATUS "nanovllm: NCCL not found: tensor parallelism on CUDA disabled")
  endif()
else()
  message(STATUS "nanovllm: CUDA backend OFF")
endif()
