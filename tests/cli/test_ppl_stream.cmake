# bgtq ppl runs every cache in step with the float32 reference, one document at a time,
# holding one row of reference log-probabilities (not predictions x vocab floats for the
# whole text): a progress line per document, --quiet silences them, and the results are
# bit-identical to those of the earlier one-cache-after-another implementation (the
# values below were printed by it, commit 8e81beb, on stories260K's sample text;
# docs/RESULTS.md rounds them: fp32 5.216, bgtq3 13.14).
include(${CMAKE_CURRENT_LIST_DIR}/../errors/cli_helpers.cmake)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})

# --docs 0 (all documents) is documented
execute_process(COMMAND ${BGTQ} ppl --help OUTPUT_VARIABLE help RESULT_VARIABLE rc)
string(REPLACE "\n" " " help1 "${help}")
if(NOT rc EQUAL 0 OR NOT help1 MATCHES "--docs N scores +at most N documents .*\\(0, the default: all\\)")
  message(FATAL_ERROR "ppl --help does not say what --docs 0 means:\n${help}")
endif()

# progress per document on the tiny model of the error tests (no data needed)
file(WRITE ${WORK}/docs3.txt "the cat sat on the mat\nhello there the dog\nthe end of the story here\n")
expect_success(CMD ppl ARGS --model ${ERRORS_DATA}/tiny.ckpt --tokenizer ${ERRORS_DATA}/tiny.tok --text ${WORK}/docs3.txt
  --kv fp32,tq3 --calib-docs 1)
if(NOT LAST_STDERR MATCHES "\\[ppl\\] document 1/2 \\([0-9]+ tokens\\)[^\n]*\n\\[ppl\\] document 2/2 ")
  message(FATAL_ERROR "ppl: no progress line per document:\n${LAST_STDERR}")
endif()
expect_success(CMD ppl ARGS --model ${ERRORS_DATA}/tiny.ckpt --tokenizer ${ERRORS_DATA}/tiny.tok --text ${WORK}/docs3.txt
  --kv fp32,tq3 --calib-docs 1 --quiet)
if(NOT LAST_STDERR STREQUAL "")
  message(FATAL_ERROR "ppl --quiet printed:\n${LAST_STDERR}")
endif()

set(S ${DATA}/stories260K)
if(NOT EXISTS ${S}/stories260K.bin OR NOT EXISTS ${S}/tok512.bin OR NOT EXISTS ${S}/sample_text.txt)
  message(STATUS "SKIPPED: the bit-identity check needs ${S} (stories260K.bin, tok512.bin, sample_text.txt)")
  return()
endif()
expect_success(CMD ppl ARGS --model ${S}/stories260K.bin --tokenizer ${S}/tok512.bin --text ${S}/sample_text.txt
  --kv fp32,fp16,tq3,bgtq3,kivi3,bgtq-k3v2 --json --quiet)
set(want
  "\"kv\":\"fp32\",\"ppl\":5.2160282461265499,\"kl\":0,"
  "\"kv\":\"fp16\",\"ppl\":5.2162134394831092,\"kl\":2.6940248864346857e-06,"
  "\"kv\":\"tq3\",\"ppl\":26.031411422497644,\"kl\":1.7083759161580143,"
  "\"kv\":\"bgtq3\",\"ppl\":13.135169953244024,\"kl\":0.98527274879381721,"
  "\"kv\":\"kivi3\",\"ppl\":5.3474499169525256,\"kl\":0.027824892123446399,"
  "\"kv\":\"bgtq-k3v2\",\"ppl\":13.896911478235147,\"kl\":1.0511627179535092,")
foreach(w IN LISTS want)
  string(FIND "${LAST_STDOUT}" "${w}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "ppl on the sample text: '${w}' not in the result:\n${LAST_STDOUT}")
  endif()
endforeach()
if(NOT LAST_STDOUT MATCHES "\"documents\":17,\"predictions\":8321,\"calibration_tokens\":512")
  message(FATAL_ERROR "ppl on the sample text: counts differ:\n${LAST_STDOUT}")
endif()
