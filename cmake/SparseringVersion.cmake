# Version and commit, compiled into the binary so every output can say what produced it.
execute_process(COMMAND git rev-parse --short=12 HEAD
  WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
  OUTPUT_VARIABLE SPARSERING_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT SPARSERING_GIT_COMMIT)
  set(SPARSERING_GIT_COMMIT "unknown")
else()
  # A tree that differs from its commit (an uncommitted edit, or a copy whose git metadata is
  # older than its files) says so rather than passing for the commit.
  execute_process(COMMAND git status --porcelain --untracked-files=no
    WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}
    OUTPUT_VARIABLE _sparsering_git_changes OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(_sparsering_git_changes)
    string(APPEND SPARSERING_GIT_COMMIT "+modified")
  endif()
endif()
