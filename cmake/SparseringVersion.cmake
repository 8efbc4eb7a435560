# Version and commit, compiled into the binary so every output can say what produced it.
execute_process(COMMAND git rev-parse --short=12 HEAD
  WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
  OUTPUT_VARIABLE SPARSERING_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT SPARSERING_GIT_COMMIT)
  set(SPARSERING_GIT_COMMIT "unknown")
endif()
