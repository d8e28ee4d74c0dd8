# cmake -DIRIS_SOURCE_DIR=<src> -DWORK_DIR=<scratch> -P check.cmake
# FindIrisCutlass against fake trees: the option wins over the environment, the version is
# checked, the wheel's layout is understood, the project's .venv Python is asked when nothing
# is set, and a tree without version.h is named.
cmake_minimum_required(VERSION 3.28)
file(REMOVE_RECURSE ${WORK_DIR})

function(fake_tree dir major minor patch)
  file(WRITE ${dir}/cutlass/version.h
       "#pragma once\n#define CUTLASS_MAJOR ${major}\n#define CUTLASS_MINOR ${minor}\n#define CUTLASS_PATCH ${patch}\n")
endfunction()
fake_tree(${WORK_DIR}/good/include 4 2 0)
fake_tree(${WORK_DIR}/old/include 4 1 0)
fake_tree(${WORK_DIR}/wheel/cutlass_library/source/include 4 2 0)
file(MAKE_DIRECTORY ${WORK_DIR}/empty)
# The probe project, copied so that a fake ${PROJECT_SOURCE_DIR}/.venv/bin/python can sit next to
# it (it answers the module's question with the fake wheel's package directory).
file(COPY ${CMAKE_CURRENT_LIST_DIR}/CMakeLists.txt DESTINATION ${WORK_DIR}/project)
file(WRITE ${WORK_DIR}/project/.venv/bin/python "#!/bin/sh\necho ${WORK_DIR}/wheel/cutlass_library\n")
file(CHMOD ${WORK_DIR}/project/.venv/bin/python PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)

# Configures the probe project with environment ENV and cache DEFINES; `expect` must match its
# RESULT line.
function(probe name expect)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "" "ENV;DEFINES")
  execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=IRIS_CUTLASS_DIR ${arg_ENV}
                          ${CMAKE_COMMAND} -S ${WORK_DIR}/project -B ${WORK_DIR}/build-${name}
                          -DIRIS_SOURCE_DIR=${IRIS_SOURCE_DIR} ${arg_DEFINES}
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE status)
  string(REGEX MATCH "RESULT [^\n]*" line "${out}")
  if(NOT status EQUAL 0 OR NOT line MATCHES "${expect}")
    message(FATAL_ERROR "${name}: expected '${expect}', got '${line}' (status ${status})\n${err}")
  endif()
  message(STATUS "${name}: ${line}")
endfunction()

probe(option "found=TRUE version=4.2.0 origin=-DIRIS_CUTLASS_DIR"
      DEFINES -DIRIS_CUTLASS_DIR=${WORK_DIR}/good)
probe(include_dir "found=TRUE version=4.2.0" DEFINES -DIRIS_CUTLASS_DIR=${WORK_DIR}/good/include)
probe(wheel "found=TRUE version=4.2.0"
      DEFINES -DIRIS_CUTLASS_DIR=${WORK_DIR}/wheel/cutlass_library)
probe(old "found=FALSE.*CUTLASS 4.1.0 .*iris::ops needs 4.2.0"
      DEFINES -DIRIS_CUTLASS_DIR=${WORK_DIR}/old)
probe(empty "found=FALSE.*holds no cutlass/version.h" DEFINES -DIRIS_CUTLASS_DIR=${WORK_DIR}/empty)
probe(environment "found=TRUE.*origin=the environment variable IRIS_CUTLASS_DIR"
      ENV IRIS_CUTLASS_DIR=${WORK_DIR}/good)
probe(venv_python "found=TRUE version=4.2.0 origin=the nvidia-cutlass package of ${WORK_DIR}/project/.venv/bin/python")
probe(option_over_environment "found=FALSE.*CUTLASS 4.1.0"
      ENV IRIS_CUTLASS_DIR=${WORK_DIR}/good DEFINES -DIRIS_CUTLASS_DIR=${WORK_DIR}/old)
