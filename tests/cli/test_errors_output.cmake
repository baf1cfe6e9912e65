# Output contract shared by the commands (docs/errors.md, row 21): a result that cannot be
# written is an error, never an exit 0 -- standard output on a full device (a full disk
# under `--json > file`), two output options naming one file -- and nothing is left behind.
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/../errors/cli_helpers.cmake)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(D ${ERRORS_DATA})

# stdout that cannot take the result: exit 1 with io_error (/dev/full: every write fails)
if(NOT EXISTS /dev/full)
  message(FATAL_ERROR "this test needs /dev/full (Linux)")
endif()
foreach(cmd "codebook;--bits;2;--dim;4;--json"
            "codebook;--bits;2;--dim;4"
            "eval;--q;${D}/q.npy;--k;${D}/k.npy;--rope;half;--bits;2;--methods;fp16,tq;--quiet;--json")
  execute_process(COMMAND ${BGTQ} ${cmd} OUTPUT_FILE /dev/full ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 1 OR NOT err MATCHES "error \\(io_error\\): writing the result to standard output failed")
    message(FATAL_ERROR "bgtq ${cmd} > /dev/full: exit ${rc}, expected 1 with an io_error; stderr: ${err}")
  endif()
endforeach()

# -o and --json-out naming one file (also through ./ and ..): refused before any work,
# nothing written
file(MAKE_DIRECTORY ${WORK}/sub)
foreach(twin "${WORK}/p.bin" "${WORK}/./p.bin" "${WORK}/sub/../p.bin")
  expect_failure(CMD calibrate RC 2 MATCH "-o and --json-out name the same file" DIR ${WORK} ABSENT ${WORK}/p.bin
    ARGS --q ${D}/q.npy --k ${D}/k.npy --rope half --avg-bits 3 -o ${WORK}/p.bin --json-out ${twin} --quiet)
endforeach()

# an fp16 baseline of keys beyond fp16's range (k_big.npy: one element 1e5) is stored as
# the fp16 cache stores it, clamped to 65504 (row 19): finite metrics, not null
bgtq_run(out err rc eval --q ${D}/q.npy --k ${D}/k_big.npy --v ${D}/v.npy --rope half --bits 2 --methods fp16 --quiet --json)
bgtq_expect_rc("${rc}" 0 "eval --methods fp16 on k_big.npy" "${err}")
foreach(m logit_mae kl out_rel_l2)
  string(JSON x GET "${out}" summary mean fp16 ${m})
  if(x STREQUAL "null" OR NOT x GREATER_EQUAL 0)
    message(FATAL_ERROR "eval fp16 on k_big.npy: ${m} = ${x}: ${out}")
  endif()
endforeach()
