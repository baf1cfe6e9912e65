# Bad-input contract of `bgtq synth` (docs/errors.md, CLI rows): no partial output file,
# no temporary left behind, one clear line, exit 1 or 2.
include(${CMAKE_CURRENT_LIST_DIR}/../errors/cli_helpers.cmake)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(G --layers 1 --tokens 9 --q-heads 2 --kv-heads 1 --dim 8 --rope half --quiet)

expect_success(CMD synth ARGS ${G} -o ${WORK}/ok)
# output directory blocked by a regular file
file(WRITE ${WORK}/blocker "x")
expect_failure(CMD synth RC 1 CATEGORY io_error MATCH "blocker" DIR ${WORK} ABSENT ${WORK}/blocker/out ARGS ${G} -o ${WORK}/blocker/out)
# v.npy cannot be replaced: the three files are all-or-nothing, so q.npy and k.npy are
# not written either, and no *.tmp.* remains
file(MAKE_DIRECTORY ${WORK}/out2/v.npy)
expect_failure(CMD synth RC 1 CATEGORY io_error MATCH "v.npy" DIR ${WORK}/out2 ABSENT ${WORK}/out2/q.npy ${WORK}/out2/k.npy
  ARGS ${G} -o ${WORK}/out2)
# an existing output is replaced only by a complete file: a failing run leaves it intact
file(MAKE_DIRECTORY ${WORK}/out3)
file(WRITE ${WORK}/out3/q.npy "old")
expect_failure(CMD synth RC 2 MATCH "--dim must be even" DIR ${WORK}/out3
  ARGS --layers 1 --tokens 9 --q-heads 2 --kv-heads 1 --dim 7 --rope half -o ${WORK}/out3)
file(READ ${WORK}/out3/q.npy kept)
if(NOT kept STREQUAL "old")
  message(FATAL_ERROR "a failing synth changed an existing q.npy")
endif()
# bad usage: exit 2, nothing created
expect_failure(CMD synth RC 2 MATCH "--kv-heads" DIR ${WORK} ABSENT ${WORK}/out4
  ARGS --layers 1 --tokens 9 --q-heads 2 --kv-heads 0 --dim 8 --rope half -o ${WORK}/out4)
# beyond what a plan holds (calibrate and eval would refuse the files): 4097 layers, 4097 KV heads
expect_failure(CMD synth RC 2 MATCH "--layers" DIR ${WORK} ABSENT ${WORK}/out4
  ARGS --layers 4097 --tokens 9 --q-heads 2 --kv-heads 1 --dim 8 --rope half -o ${WORK}/out4)
expect_failure(CMD synth RC 2 MATCH "--kv-heads" DIR ${WORK} ABSENT ${WORK}/out4
  ARGS --layers 1 --tokens 9 --q-heads 4097 --kv-heads 4097 --dim 8 --rope half -o ${WORK}/out4)
expect_failure(CMD synth RC 2 MATCH "rope|pairing" DIR ${WORK} ABSENT ${WORK}/out5
  ARGS --layers 1 --tokens 9 --q-heads 2 --kv-heads 1 --dim 8 --rope sideways -o ${WORK}/out5)
