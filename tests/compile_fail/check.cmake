# Runs the CUDA compiler on one negative-compile source and checks that it fails with the
# message named on the source's first line ("// expect: <text>"); "// expect: OK" means it must
# compile. An optional "// arch: NN" line picks the target (default 90).
# -D COMPILER=... -D INCLUDE=... -D SOURCE=...
file(STRINGS ${SOURCE} lines LIMIT_COUNT 3)
set(expect "")
set(arch 90)
foreach(line ${lines})
  if(line MATCHES "^// expect: (.*)$")
    set(expect "${CMAKE_MATCH_1}")
  elseif(line MATCHES "^// arch: ([0-9]+a?)$")
    set(arch "${CMAKE_MATCH_1}")
  endif()
endforeach()
if(expect STREQUAL "")
  message(FATAL_ERROR "${SOURCE}: no '// expect: ' line")
endif()
get_filename_component(stem ${SOURCE} NAME_WE)
execute_process(
  COMMAND ${COMPILER} -std=c++20 --expt-relaxed-constexpr -arch=sm_${arch} -I${INCLUDE} -c
          ${SOURCE} -o ${CMAKE_CURRENT_BINARY_DIR}/${stem}.o
  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(expect STREQUAL "OK")
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "${SOURCE} should compile, but:\n${out}${err}")
  endif()
  return()
endif()
if(status EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled; it should fail with \"${expect}\"")
endif()
string(FIND "${out}${err}" "${expect}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${SOURCE} failed without \"${expect}\":\n${out}${err}")
endif()
