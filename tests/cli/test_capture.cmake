# bgtq capture: exit codes without data; shapes and sizes of q/k/v.npy with stories260K.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)

execute_process(COMMAND ${BGTQ} capture --model x --tokenizer y --text z RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "missing -o: expected exit 2, got ${rc}: ${err}")
endif()
execute_process(COMMAND ${BGTQ} capture --model x --tokenizer y --text z --tokens 0 -o ${WORK}/o
  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "--tokens 0: expected exit 2, got ${rc}")
endif()
execute_process(COMMAND ${BGTQ} capture --model ${WORK}/absent.bin --tokenizer y --text z -o ${WORK}/o
  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
if(NOT rc EQUAL 1 OR EXISTS ${WORK}/o/q.npy)
  message(FATAL_ERROR "absent model: expected exit 1 and no output, got ${rc}")
endif()

set(M ${DATA}/stories260K/stories260K.bin)
set(T ${DATA}/stories260K/tok512.bin)
set(X ${DATA}/stories260K/sample_text.txt)
if(NOT EXISTS ${M} OR NOT EXISTS ${T} OR NOT EXISTS ${X})
  message(STATUS "SKIPPED: ${M} is absent")
  return()
endif()

# a build without bgtq/io/npy.hpp registers capture but cannot write .npy files
execute_process(COMMAND ${BGTQ} capture --model ${M} --tokenizer ${T} --text ${X} --tokens 1 -o ${WORK}/probe
  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(err MATCHES "no \\.npy writer")
  message(STATUS "SKIPPED: this build of bgtq has no .npy writer")
  return()
endif()

execute_process(COMMAND ${BGTQ} capture --model ${M} --tokenizer ${T} --text ${X} --tokens 513 -o ${WORK}/big --quiet
  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
# the error names the option, its value and the model's limit, and nothing is written
if(NOT rc EQUAL 1 OR NOT err MATCHES "^bgtq capture: error \\(invalid_argument\\): --tokens 513 exceeds the model's context seq_len = 512\n$"
   OR EXISTS ${WORK}/big)
  message(FATAL_ERROR "--tokens 513 > seq_len: expected exit 1 naming --tokens 513 and seq_len = 512, nothing written; got ${rc}: ${err}")
endif()


execute_process(COMMAND ${BGTQ} capture --model ${M} --tokenizer ${T} --text ${X} --tokens 100 -o ${WORK}/a/b --json
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "capture failed (${rc}): ${err}")
endif()
string(JSON ntok GET "${out}" tokens)
string(JSON hq GET "${out}" q_shape 2)
if(NOT ntok EQUAL 100 OR NOT hq EQUAL 8)
  message(FATAL_ERROR "unexpected JSON: ${out}")
endif()
bgtq_expect_npy(${WORK}/a/b/q.npy "5, *100, *8, *8" 32000)
bgtq_expect_npy(${WORK}/a/b/k.npy "5, *100, *4, *8" 16000)
bgtq_expect_npy(${WORK}/a/b/v.npy "5, *100, *4, *8" 16000)

# default: min(seq_len, all tokens) = 512 for this text
execute_process(COMMAND ${BGTQ} capture --model ${M} --tokenizer ${T} --text ${X} -o ${WORK}/full --quiet
  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT err STREQUAL "")
  message(FATAL_ERROR "capture --quiet: rc ${rc}, stderr '${err}'")
endif()
bgtq_expect_npy(${WORK}/full/k.npy "5, *512, *4, *8" 81920)
