# The CUDA backend (kernels/cuda/, core/cuda/): WEFT_CUDA=AUTO builds it when
# nvcc and the CUDA toolkit are found, ON insists on them, OFF leaves them out.
# A build without CUDA compiles none of the cuda/ folders; tensors on cuda:N
# then fail with an error saying this build has no CUDA support.
#
# Sanitizer and fuzz builds default to OFF under AUTO: nvcc's device code is not
# instrumented, and the CUDA driver's allocations clash with ASan's shadow
# memory on a machine that has a GPU (set WEFT_CUDA=ON to build it anyway).
set(WEFT_CUDA "AUTO" CACHE STRING "Build the CUDA backend: AUTO, ON or OFF")
set_property(CACHE WEFT_CUDA PROPERTY STRINGS AUTO ON OFF)
# Hopper (sm_90) by default; override with -DCMAKE_CUDA_ARCHITECTURES="80;90".
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 90)
endif()

set(WEFT_HAVE_CUDA OFF)
if(WEFT_CUDA STREQUAL "ON" OR
   (WEFT_CUDA STREQUAL "AUTO" AND WEFT_SANITIZE STREQUAL "" AND NOT WEFT_FUZZ))
  include(CheckLanguage)
  # nvcc outside PATH (the toolkit's usual place): offered to check_language,
  # which tries it and leaves CMAKE_CUDA_COMPILER unset when it cannot build
  # (say, a host compiler this nvcc does not support) — AUTO then goes without.
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX})
    find_program(WEFT_NVCC nvcc HINTS /usr/local/cuda/bin ENV CUDA_HOME PATH_SUFFIXES bin)
    if(WEFT_NVCC)
      set(ENV{CUDACXX} ${WEFT_NVCC})
    endif()
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    find_package(CUDAToolkit)
  endif()
  if(CMAKE_CUDA_COMPILER AND CUDAToolkit_FOUND AND TARGET CUDA::cublasLt)
    set(WEFT_HAVE_CUDA ON)
  elseif(WEFT_CUDA STREQUAL "ON")
    message(FATAL_ERROR "WEFT_CUDA=ON but nvcc or the CUDA toolkit (cudart, cuBLASLt) was not "
                        "found: put nvcc on PATH or pass -DCMAKE_CUDA_COMPILER=/path/to/nvcc, "
                        "or configure with -DWEFT_CUDA=OFF")
  endif()
endif()
if(WEFT_HAVE_CUDA)
  # weft's headers are C++20. CMake 3.25 does not know nvcc 13's flag for it
  # (and refuses CUDA sources in a C++20 target): tell it.
  if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  if(CCACHE_PROGRAM)
    set(CMAKE_CUDA_COMPILER_LAUNCHER "${CCACHE_PROGRAM}")
  endif()
  message(STATUS "weft: CUDA backend ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, "
                 "architectures ${CMAKE_CUDA_ARCHITECTURES})")
  # The nccl backend (comm/cuda/nccl*.cpp) where the toolkit has NCCL 2.18 or
  # newer (ncclCommSplit); without it the build has no nccl backend.
  set(WEFT_HAVE_NCCL OFF)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    file(STRINGS ${NCCL_INCLUDE_DIR}/nccl.h WEFT_NCCL_VERSION_LINES
         REGEX "^#define NCCL_(MAJOR|MINOR) +[0-9]+")
    string(REGEX REPLACE ".*NCCL_MAJOR +([0-9]+).*" "\\1" WEFT_NCCL_MAJOR "${WEFT_NCCL_VERSION_LINES}")
    string(REGEX REPLACE ".*NCCL_MINOR +([0-9]+).*" "\\1" WEFT_NCCL_MINOR "${WEFT_NCCL_VERSION_LINES}")
    if("${WEFT_NCCL_MAJOR}.${WEFT_NCCL_MINOR}" VERSION_GREATER_EQUAL 2.18)
      set(WEFT_HAVE_NCCL ON)
    endif()
  endif()
  message(STATUS "weft: nccl backend ${WEFT_HAVE_NCCL} (NCCL ${WEFT_NCCL_MAJOR}.${WEFT_NCCL_MINOR} "
                 "at ${NCCL_LIBRARY})")
  # cuDNN's fused attention (kernels/cuda/attention_cudnn.cpp): NVIDIA's
  # header-only cuDNN frontend, which scripts/install-deps.sh fetches into
  # .deps/, and cuDNN 9's headers. libcudnn itself is opened at run time, so
  # the binary runs where cuDNN is missing (weft info says why it is off).
  set(WEFT_CUDNN_FRONTEND_DIR "${CMAKE_SOURCE_DIR}/.deps/cudnn-frontend-1.32.0/include"
      CACHE PATH "The include folder of NVIDIA's cuDNN frontend (cudnn_frontend.h)")
  find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ENV CUDNN_INCLUDE_DIR)
  set(WEFT_HAVE_CUDNN OFF)
  if(EXISTS "${WEFT_CUDNN_FRONTEND_DIR}/cudnn_frontend.h" AND CUDNN_INCLUDE_DIR)
    set(WEFT_HAVE_CUDNN ON)
  endif()
  message(STATUS "weft: cuDNN attention ${WEFT_HAVE_CUDNN} (frontend ${WEFT_CUDNN_FRONTEND_DIR}, "
                 "cudnn.h in ${CUDNN_INCLUDE_DIR})")
else()
  message(STATUS "weft: CUDA backend OFF (WEFT_CUDA=${WEFT_CUDA})")
endif()
