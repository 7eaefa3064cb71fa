# Decides whether the CUDA device is built (TFM_WITH_CUDA) from TFM_CUDA.
# AUTO turns it on when nvcc is found; ON fails loudly when it is not.
include(GNUInstallDirs)
include(CheckLanguage)

string(TOUPPER "${TFM_CUDA}" _tfm_cuda)
if(NOT _tfm_cuda MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "TFM_CUDA must be AUTO, ON or OFF (got '${TFM_CUDA}')")
endif()

set(TFM_WITH_CUDA OFF)
set(TFM_CUDA_ARCH_NOTE "")
if(NOT _tfm_cuda STREQUAL "OFF")
  # Debian-style installs keep nvcc in /usr/local/cuda/bin, often off PATH.
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_ARCHITECTURES "${TFM_CUDA_ARCHITECTURES}")
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    # CMake 3.25 does not know nvcc's C++20 flag (nvcc >= 12 has it).
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(TFM_WITH_CUDA ON)
    set(TFM_CUDA_ARCH_NOTE " (CUDA ${CUDAToolkit_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES})")
  elseif(_tfm_cuda STREQUAL "ON")
    message(FATAL_ERROR "TFM_CUDA=ON but no CUDA compiler (nvcc) was found; "
                        "install the CUDA toolkit or configure with -DTFM_CUDA=OFF")
  else()
    message(STATUS "nvcc not found: building the CPU device only")
  endif()
endif()
