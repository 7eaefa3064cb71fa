# Decides whether the CUDA device is built (TFM_WITH_CUDA) from TFM_CUDA.
# AUTO turns it on where a GPU can use it: nvcc found and a CUDA driver
# present (libcuda.so.1 known to the loader, nvidia-smi, or /dev/nvidia*);
# nvcc alone compiles every kernel for a machine that runs none of them. ON
# builds it wherever nvcc is (make -f Makefile.data test does, so that CI
# keeps compiling every CUDA file) and fails loudly where it is not.
include(GNUInstallDirs)
include(CheckLanguage)

# Sets `out` to what shows a CUDA driver here, or to "" when nothing does.
# The toolkit's stubs/libcuda.so (for linking) is no driver.
function(tfm_cuda_driver out)
  set(found "")
  if(EXISTS /dev/nvidia0 OR EXISTS /dev/nvidiactl)
    set(found "/dev/nvidia*")
  endif()
  find_program(_tfm_nvidia_smi nvidia-smi NO_CACHE)
  if(_tfm_nvidia_smi)
    set(found "nvidia-smi")
  endif()
  find_program(_tfm_ldconfig ldconfig PATHS /sbin /usr/sbin NO_CACHE)
  if(_tfm_ldconfig)
    execute_process(COMMAND ${_tfm_ldconfig} -p OUTPUT_VARIABLE _tfm_libs ERROR_QUIET)
    if(_tfm_libs MATCHES "libcuda\\.so\\.1 [^\n]*=> ([^\n]*)" AND NOT CMAKE_MATCH_1 MATCHES "/stubs/")
      set(found "libcuda.so.1")
    endif()
  endif()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

string(TOUPPER "${TFM_CUDA}" _tfm_cuda)
if(NOT _tfm_cuda MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "TFM_CUDA must be AUTO, ON or OFF (got '${TFM_CUDA}')")
endif()

set(TFM_WITH_CUDA OFF)
set(TFM_CUDA_ARCH_NOTE "")
set(_tfm_driver "")
if(_tfm_cuda STREQUAL "AUTO")
  tfm_cuda_driver(_tfm_driver)
  if(NOT _tfm_driver)
    message(STATUS "no CUDA driver (libcuda.so.1, nvidia-smi, /dev/nvidia*): building the CPU device "
                   "only; -DTFM_CUDA=ON builds the CUDA device anyway")
    set(_tfm_cuda OFF)
  endif()
endif()
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
