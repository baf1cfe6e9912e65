# Bad-input contract of `bgtq allocate` (docs/errors.md rows 6-9 through the CLI).
include(${CMAKE_CURRENT_LIST_DIR}/../errors/cli_helpers.cmake)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
file(WRITE ${WORK}/s.txt "4 3 2 1 1\n")

# b outside 0..8: usage error
expect_failure(CMD allocate RC 2 MATCH "--b-max 9 is out of range \\[0, 8\\]" ARGS --scores ${WORK}/s.txt --avg-bits 3 --b-max 9)
expect_failure(CMD allocate RC 2 MATCH "--b-min -1 is out of range" ARGS --scores ${WORK}/s.txt --avg-bits 3 --b-min -1)
# avg_bits not finite: usage error
expect_failure(CMD allocate RC 2 MATCH "^bgtq allocate: --avg-bits: 'nan' is not finite$" ARGS --scores ${WORK}/s.txt --avg-bits nan)
expect_failure(CMD allocate RC 2 MATCH "^bgtq allocate: --avg-bits: 'inf' is not finite$" ARGS --scores ${WORK}/s.txt --avg-bits inf)
# avg_bits below b_min: infeasible, exit 1
expect_failure(CMD allocate RC 1 CATEGORY infeasible MATCH "B = 7 is infeasible: L = 5 blocks at b_min = 2"
  ARGS --scores ${WORK}/s.txt --avg-bits 1.5 --b-min 2)
# a non-finite score in the file
file(WRITE ${WORK}/nan.txt "1 2 nan 4\n")
expect_failure(CMD allocate RC 1 CATEGORY non_finite MATCH "nan.txt:1: score 2" ARGS --scores ${WORK}/nan.txt --avg-bits 2)
# a NUL byte inside a token: the token is not a number (not read as the number before
# the NUL), and the message shows the byte instead of ending there
execute_process(COMMAND printf "1 2 3\\000garbage\\n" OUTPUT_FILE ${WORK}/nul.txt)
expect_failure(CMD allocate RC 1 CATEGORY format_error MATCH "nul.txt:1: token '3.x00garbage' is not a number"
  ARGS --scores ${WORK}/nul.txt --avg-bits 2)
# avg_bits above b_max: exit 0, capped, one warning line on stderr
expect_success(CMD allocate ARGS --scores ${WORK}/s.txt --avg-bits 7.5 --b-max 6 --json)
if(NOT LAST_STDERR MATCHES "^bgtq allocate: warning: bit budget B = 37 exceeds L \\* b_max = 5 \\* 6 = 30; capped to 30")
  message(FATAL_ERROR "cap warning missing or changed: ${LAST_STDERR}")
endif()
string(JSON capped GET "${LAST_STDOUT}" capped)
if(NOT capped STREQUAL "ON")
  message(FATAL_ERROR "capped is ${capped}: ${LAST_STDOUT}")
endif()
