# ctest driver: install the build tree's `devel` component into a fresh prefix,
# then configure, build and run tests/cpp/consumer against it. Arguments (-D):
# BUILD_DIR, SOURCE_DIR, WORK_DIR, TARGET, GENERATOR, MAKE_PROGRAM, CXX_COMPILER,
# SIMDJSON_DIR (the simdjson package the build tree used: the consumer gets the same).
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}")
  endif()
endfunction()

run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} --component devel)
if(NOT EXISTS ${prefix}/include/cpytree/cpytree.h)
  message(FATAL_ERROR "headers were not installed into ${prefix}")
endif()
set(configure ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/build -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX_COMPILER})
if(MAKE_PROGRAM)
  list(APPEND configure -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})
endif()
if(SIMDJSON_DIR)
  list(APPEND configure -Dsimdjson_DIR=${SIMDJSON_DIR})
endif()
run(${configure})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/${TARGET})
message(STATUS "consumer built against ${prefix} and ran")
