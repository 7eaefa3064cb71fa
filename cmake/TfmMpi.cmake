# Decides how tfm-train's processes talk (docs/guide.md, "Many GPUs and
# machines") from TFM_MPI:
#   TFM_WITH_MPI   MPI (Debian's libopenmpi-dev): ranks, the host's
#                  collectives, and the gradients' all-reduce on the CPU.
#                  AUTO when found; ON fails loudly when it is not.
#   TFM_WITH_NCCL  NCCL from the CUDA toolkit, with CUDA: the gradients'
#                  all-reduce on GPUs (MPI hands out its id; without MPI,
#                  one rank: the data-parallel bench on one GPU).
include(${CMAKE_CURRENT_LIST_DIR}/TfmAutoOption.cmake)
tfm_auto_option(TFM_MPI "Build data-parallel training over MPI: AUTO (when found), ON or OFF" _tfm_mpi)

set(TFM_WITH_MPI OFF)
set(TFM_WITH_NCCL OFF)
if(NOT _tfm_mpi STREQUAL "OFF")
  find_package(MPI COMPONENTS CXX QUIET)
  if(MPI_CXX_FOUND)
    set(TFM_WITH_MPI ON)
  elseif(_tfm_mpi STREQUAL "ON")
    message(FATAL_ERROR "TFM_MPI=ON but no MPI was found; install libopenmpi-dev "
                        "(make -f Makefile.data deps) or configure with -DTFM_MPI=OFF")
  else()
    message(STATUS "MPI not found: tfm-train runs as one process")
  endif()
endif()

if(TFM_WITH_CUDA)
  find_path(TFM_NCCL_INCLUDE nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(TFM_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_LIBRARY_ROOT}/lib)
  if(TFM_NCCL_INCLUDE AND TFM_NCCL_LIBRARY)
    set(TFM_WITH_NCCL ON)
  else()
    message(STATUS "NCCL not found: GPU ranks cannot train together")
  endif()
endif()
