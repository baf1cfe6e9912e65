# bench/stack_stores.sh on a small object (tests/docs/stack_stores_probe.s): it must count
# the zmm stores to the stack through %rsp (1 in probe_rsp) and %rbp (3 in probe_rbp: a
# function that realigns its stack for zmm spills through %rbp, which the script missed
# until 2026-12-06), and nothing in probe_clean (a store through another register, a load,
# a ymm store, a register move).
# -DCXX=compiler -DSRC=source dir -DWORK=scratch dir
file(MAKE_DIRECTORY "${WORK}")
execute_process(COMMAND "${CXX}" -c "${SRC}/tests/docs/stack_stores_probe.s" -o "${WORK}/probe.o"
                RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "assembling the probe failed: ${err}")
endif()
execute_process(COMMAND bash "${SRC}/bench/stack_stores.sh" "${WORK}/probe.o" "probe_"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "stack_stores.sh exited ${rc}: ${err}")
endif()
string(REGEX MATCHALL "[^\n]+" lines "${out}")
list(LENGTH lines n)
if(NOT n EQUAL 2 OR NOT out MATCHES " 1 vector stores to the stack  [0-9a-f]+ <probe_rsp>:"
   OR NOT out MATCHES " 3 vector stores to the stack  [0-9a-f]+ <probe_rbp>:")
  message(FATAL_ERROR "stack_stores.sh listed, expected probe_rsp 1 and probe_rbp 3 only:\n${out}")
endif()
