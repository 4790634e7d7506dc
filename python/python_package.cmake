# Decides whether the Python package is built (NANOVLLM_PYTHON_ENABLED) and finds Python and
# pybind11 for it. Runs before the libraries are defined: they are then compiled as
# position-independent code, to be linked into the extension module.
set(NANOVLLM_PYTHON_ENABLED OFF)
if(NANOVLLM_PYTHON STREQUAL "OFF")
  return()
endif()
if(NANOVLLM_SANITIZE OR NANOVLLM_SANITIZE_THREAD OR NANOVLLM_FUZZ)
  if(NANOVLLM_PYTHON STREQUAL "ON")
    message(FATAL_ERROR "NANOVLLM_PYTHON=ON cannot be combined with the sanitizer or fuzz builds")
  endif()
  return()
endif()
# The Debian interpreter (whose python3-dev and pybind11-dev scripts/setup.sh installs) unless one
# is named (-DPython_EXECUTABLE=...) or a venv is active: not a pyenv shim earlier in PATH.
if(NOT DEFINED Python_EXECUTABLE AND NOT DEFINED ENV{VIRTUAL_ENV} AND EXISTS /usr/bin/python3)
  set(Python_EXECUTABLE /usr/bin/python3)
endif()
find_package(Python 3.10 COMPONENTS Interpreter Development.Module QUIET)
if(Python_FOUND)
  # Debian's pybind11-dev, else a pip-installed pybind11 of this Python (the GPU image's).
  execute_process(COMMAND ${Python_EXECUTABLE} -m pybind11 --cmakedir OUTPUT_VARIABLE NANOVLLM_PIP_PYBIND11
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  find_package(pybind11 2.10 CONFIG QUIET HINTS ${NANOVLLM_PIP_PYBIND11})
endif()
if(NOT Python_FOUND OR NOT pybind11_FOUND)
  if(NANOVLLM_PYTHON STREQUAL "ON")
    message(FATAL_ERROR "NANOVLLM_PYTHON=ON needs python3-dev and pybind11-dev (scripts/setup.sh installs them)")
  endif()
  message(STATUS "Python package: off (no python3-dev or pybind11-dev)")
  return()
endif()
message(STATUS "Python package: on (${Python_EXECUTABLE}, pybind11 ${pybind11_VERSION})")
set(NANOVLLM_PYTHON_ENABLED ON)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
# -fPIC would otherwise keep gcc from inlining the libraries' own global functions (they could be
# interposed): the executables keep -fPIE's code.
add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fno-semantic-interposition>)
