# Decides whether the Python module `tfm` (python/) is built, from
# TFM_PYTHON: AUTO builds it when nanobind and the headers of a Python are
# found, ON fails loudly without them, OFF never. Sets TFM_WITH_PYTHON.
#
# The Python is the one CMake is given (Python_EXECUTABLE: pip install's,
# through scikit-build-core), else the checkout's .venv (Makefile.data's
# deps: Debian's python3 with nanobind from PyPI, its headers from
# python3-dev), else Debian's /usr/bin/python3. nanobind is found where
# that Python has it (python -m nanobind --cmake_dir).
# The sanitizer and fuzz configurations never build it: their programs
# and tests are what they check, and an instrumented module would need the
# sanitizer runtime preloaded into python.
include(${CMAKE_CURRENT_LIST_DIR}/TfmAutoOption.cmake)
tfm_auto_option(TFM_PYTHON "Build the Python module: AUTO (when nanobind and Python's headers are found), ON or OFF" _tfm_python)

set(TFM_WITH_PYTHON OFF)
set(TFM_PYTHON_NOTE "")
if(TFM_SANITIZE OR TFM_FUZZ)
  if(_tfm_python STREQUAL "ON")
    message(FATAL_ERROR "TFM_PYTHON=ON goes with neither TFM_SANITIZE nor TFM_FUZZ")
  endif()
elseif(NOT _tfm_python STREQUAL "OFF")
  if(NOT Python_EXECUTABLE)
    if(EXISTS ${PROJECT_SOURCE_DIR}/.venv/bin/python)
      set(Python_EXECUTABLE ${PROJECT_SOURCE_DIR}/.venv/bin/python)
    elseif(EXISTS /usr/bin/python3)
      set(Python_EXECUTABLE /usr/bin/python3)
    endif()
  endif()
  find_package(Python 3.9 COMPONENTS Interpreter Development.Module QUIET)
  if(Python_FOUND)
    execute_process(COMMAND ${Python_EXECUTABLE} -m nanobind --cmake_dir
                    OUTPUT_VARIABLE _tfm_nanobind_dir OUTPUT_STRIP_TRAILING_WHITESPACE
                    RESULT_VARIABLE _tfm_nanobind_rc ERROR_QUIET)
    if(_tfm_nanobind_rc EQUAL 0)
      find_package(nanobind CONFIG QUIET HINTS ${_tfm_nanobind_dir})
    endif()
  endif()
  if(Python_FOUND AND nanobind_FOUND)
    set(TFM_WITH_PYTHON ON)
    set(TFM_PYTHON_NOTE " (${Python_EXECUTABLE}, nanobind ${nanobind_VERSION})")
  elseif(_tfm_python STREQUAL "ON")
    message(FATAL_ERROR "TFM_PYTHON=ON but no Python with headers and nanobind was found; "
                        "make -f Makefile.data deps installs them, or configure with -DTFM_PYTHON=OFF")
  else()
    message(STATUS "Python headers or nanobind not found: no Python module")
  endif()
endif()
# The module is a shared object holding the static libraries.
if(TFM_WITH_PYTHON)
  set(CMAKE_POSITION_INDEPENDENT_CODE ON)
endif()
