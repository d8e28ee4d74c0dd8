# FindIrisCutlass: the CUTLASS headers that iris::ops is built on (PyPI nvidia-cutlass, pinned).
#
# Looked up in this order; the first hit wins:
#   1. -DIRIS_CUTLASS_DIR=<dir>            (CMake cache variable)
#   2. the environment variable IRIS_CUTLASS_DIR
#   3. the installed Python package, asked through ${PROJECT_SOURCE_DIR}/.venv/bin/python and
#      then python3 on PATH: <site-packages>/cutlass_library/source
# <dir> may be a CUTLASS source tree (holding include/cutlass/version.h), the include directory
# itself, or the cutlass_library package directory of the wheel.
#
# Sets IrisCutlass_FOUND, IrisCutlass_VERSION, IrisCutlass_INCLUDE_DIRS and, when found, the
# INTERFACE target iris_cutlass (CUTLASS's include/ and tools/util/include). The version must be
# IRIS_CUTLASS_REQUIRED_VERSION: other releases change the collective interfaces iris::ops uses.
set(IRIS_CUTLASS_REQUIRED_VERSION 4.2.0)
set(IRIS_CUTLASS_DIR "" CACHE PATH "CUTLASS headers for iris::ops (default: the nvidia-cutlass Python package)")

# The include directory under `root`, or empty.
function(_iris_cutlass_include_dir root out)
  set(${out} "" PARENT_SCOPE)
  foreach(candidate ${root}/include ${root} ${root}/source/include)
    if(EXISTS ${candidate}/cutlass/version.h)
      set(${out} ${candidate} PARENT_SCOPE)
      return()
    endif()
  endforeach()
endfunction()

set(_iris_cutlass_roots)
set(_iris_cutlass_origin)
if(IRIS_CUTLASS_DIR)
  list(APPEND _iris_cutlass_roots ${IRIS_CUTLASS_DIR})
  list(APPEND _iris_cutlass_origin "-DIRIS_CUTLASS_DIR")
elseif(DEFINED ENV{IRIS_CUTLASS_DIR} AND NOT "$ENV{IRIS_CUTLASS_DIR}" STREQUAL "")
  list(APPEND _iris_cutlass_roots $ENV{IRIS_CUTLASS_DIR})
  list(APPEND _iris_cutlass_origin "the environment variable IRIS_CUTLASS_DIR")
else()
  set(_iris_pythons)
  if(EXISTS ${PROJECT_SOURCE_DIR}/.venv/bin/python)
    list(APPEND _iris_pythons ${PROJECT_SOURCE_DIR}/.venv/bin/python)
  endif()
  find_program(_iris_python3 NAMES python3 NO_CACHE)
  if(_iris_python3)
    list(APPEND _iris_pythons ${_iris_python3})
  endif()
  foreach(python ${_iris_pythons})
    execute_process(
      COMMAND ${python} -c "import cutlass_library, os; print(os.path.dirname(cutlass_library.__file__))"
      OUTPUT_VARIABLE _iris_package_dir OUTPUT_STRIP_TRAILING_WHITESPACE
      RESULT_VARIABLE _iris_python_status ERROR_QUIET)
    if(_iris_python_status EQUAL 0 AND _iris_package_dir)
      list(APPEND _iris_cutlass_roots ${_iris_package_dir}/source)
      list(APPEND _iris_cutlass_origin "the nvidia-cutlass package of ${python}")
    endif()
  endforeach()
endif()

set(IrisCutlass_FOUND FALSE)
set(IrisCutlass_REASON "no CUTLASS: pass -DIRIS_CUTLASS_DIR=<dir>, set IRIS_CUTLASS_DIR, or pip install nvidia-cutlass==4.2.0.0")
list(LENGTH _iris_cutlass_roots _iris_count)
if(_iris_count GREATER 0)
  math(EXPR _iris_last "${_iris_count} - 1")
  foreach(i RANGE ${_iris_last})
    list(GET _iris_cutlass_roots ${i} root)
    list(GET _iris_cutlass_origin ${i} origin)
    _iris_cutlass_include_dir(${root} include_dir)
    if(NOT include_dir)
      set(IrisCutlass_REASON "${root} (from ${origin}) holds no cutlass/version.h")
      continue()
    endif()
    file(STRINGS ${include_dir}/cutlass/version.h _iris_version_lines
         REGEX "^#define CUTLASS_(MAJOR|MINOR|PATCH) ")
    set(_iris_version)
    foreach(part MAJOR MINOR PATCH)
      string(REGEX MATCH "CUTLASS_${part} ([0-9]+)" _ "${_iris_version_lines}")
      list(APPEND _iris_version ${CMAKE_MATCH_1})
    endforeach()
    list(JOIN _iris_version "." _iris_version)
    if(NOT _iris_version VERSION_EQUAL IRIS_CUTLASS_REQUIRED_VERSION)
      set(IrisCutlass_REASON "CUTLASS ${_iris_version} at ${include_dir} (from ${origin}); iris::ops needs ${IRIS_CUTLASS_REQUIRED_VERSION}")
      continue()
    endif()
    set(IrisCutlass_FOUND TRUE)
    set(IrisCutlass_REASON "")
    set(IrisCutlass_VERSION ${_iris_version})
    set(IrisCutlass_INCLUDE_DIRS ${include_dir})
    get_filename_component(_iris_source ${include_dir} DIRECTORY)
    if(EXISTS ${_iris_source}/tools/util/include/cutlass/util/packed_stride.hpp)
      list(APPEND IrisCutlass_INCLUDE_DIRS ${_iris_source}/tools/util/include)
    endif()
    set(IrisCutlass_ORIGIN ${origin})
    break()
  endforeach()
endif()

if(IrisCutlass_FOUND AND NOT TARGET iris_cutlass)
  add_library(iris_cutlass INTERFACE)
  # SYSTEM: CUTLASS's own warnings are not ours to fix (and -Werror must not trip on them).
  target_include_directories(iris_cutlass SYSTEM INTERFACE ${IrisCutlass_INCLUDE_DIRS})
endif()
