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
  if(NOT CMAKE_CUDA_COMPILER)
    find_program(WEFT_NVCC nvcc HINTS /usr/local/cuda/bin ENV CUDA_HOME PATH_SUFFIXES bin)
    if(WEFT_NVCC)
      set(CMAKE_CUDA_COMPILER ${WEFT_NVCC})
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
  # CMake before 3.26 knows no C++20 flag for nvcc (which has had -std=c++20
  # since CUDA 12) and refuses the cxx_std_20 requirement weft carries.
  if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
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
else()
  message(STATUS "weft: CUDA backend OFF (WEFT_CUDA=${WEFT_CUDA})")
endif()
