# Run by the ctest install_find_package: installs the build tree into WORK_DIR/prefix, builds the
# consumer project in WORK_DIR/consumer against it and checks that it reports Qwen2.5-3B's 36 layers.
foreach(var BINARY_DIR CONSUMER_SOURCE_DIR WORK_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "install_and_consume.cmake needs -D${var}=...")
  endif()
endforeach()
set(prefix ${WORK_DIR}/prefix)
set(consumer_build ${WORK_DIR}/consumer)
file(REMOVE_RECURSE ${WORK_DIR})

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()

run_step("cmake --install" ${CMAKE_COMMAND} --install ${BINARY_DIR} --prefix ${prefix})
run_step("configuring the consumer" ${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR} -B ${consumer_build}
         -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_BUILD_TYPE=Release
         -DCMAKE_PREFIX_PATH=${prefix})
run_step("building the consumer" ${CMAKE_COMMAND} --build ${consumer_build})
run_step("running the consumer" ${consumer_build}/consumer ${prefix}/share/sparsering/configs/models/qwen2.5-3b.yaml)
if(NOT step_output MATCHES "qwen2.5-3b: 36 layers")
  message(FATAL_ERROR "unexpected consumer output: ${step_output}")
endif()
message(STATUS "consumer: ${step_output}")
file(REMOVE_RECURSE ${WORK_DIR})
