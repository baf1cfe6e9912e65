# A run killed by SIGTERM while writing leaves no temporary (docs/errors.md, section 1):
# tests/cli/interrupt.sh does the work (a background process and a signal need a shell).
find_program(BASH bash)
find_program(MKFIFO mkfifo)
if(NOT BASH OR NOT MKFIFO)
  message("SKIPPED: needs bash and mkfifo")
  return()
endif()
execute_process(COMMAND ${BASH} ${CMAKE_CURRENT_LIST_DIR}/interrupt.sh ${BGTQ} ${WORK}
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc TIMEOUT 60)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "interrupt.sh: exit ${rc}\n${out}${err}")
endif()
