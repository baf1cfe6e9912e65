# bgtq generate: exit codes without data; the published greedy sample with stories260K.
file(MAKE_DIRECTORY ${WORK})

# bad usage: exit 2, the message (first line) naming the option
execute_process(COMMAND ${BGTQ} generate --model x RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "^bgtq generate: missing required option --tokenizer\n")
  message(FATAL_ERROR "missing --tokenizer: expected exit 2 naming --tokenizer, got ${rc}: ${err}")
endif()
execute_process(COMMAND ${BGTQ} generate --model x --tokenizer y --steps -3 RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "^bgtq generate: --steps -3 is out of range \\[0, [0-9]+\\]\n")
  message(FATAL_ERROR "--steps -3: expected exit 2 naming --steps and -3, got ${rc}: ${err}")
endif()
# a file that is not a checkpoint, with a valid tokenizer (not the same file: then a message
# naming the tokenizer passed too): exit 1 naming the model and the bad header field
set(TOK ${CMAKE_CURRENT_LIST_DIR}/../errors/data/tiny.tok)
file(WRITE ${WORK}/junk.bin "not a llama2.c checkpoint at all")
execute_process(COMMAND ${BGTQ} generate --model ${WORK}/junk.bin --tokenizer ${TOK}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 1 OR NOT err MATCHES "^bgtq generate: error \\(format_error\\): [^\n]*/junk\\.bin: [a-z_]+ = -?[0-9]+ is outside the sane range")
  message(FATAL_ERROR "junk checkpoint: expected exit 1 naming the file, got ${rc}: ${err}")
endif()
execute_process(COMMAND ${BGTQ} generate --model ${WORK}/absent.bin --tokenizer ${TOK}
  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
if(NOT rc EQUAL 1 OR NOT err MATCHES "^bgtq generate: error \\(io_error\\): cannot open checkpoint '[^'\n]*/absent\\.bin'")
  message(FATAL_ERROR "absent checkpoint: expected exit 1 naming the file, got ${rc}: ${err}")
endif()

set(M ${DATA}/stories260K/stories260K.bin)
set(T ${DATA}/stories260K/tok512.bin)
if(NOT EXISTS ${M} OR NOT EXISTS ${T})
  message(STATUS "SKIPPED: ${M} is absent")
  return()
endif()
execute_process(COMMAND ${BGTQ} generate --model ${M} --tokenizer ${T} --steps 40
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "generate failed (${rc}): ${err}")
endif()
if(NOT out MATCHES "^Once upon a time, there was a little girl named Lily\\. She loved to play outside in the park\\.")
  message(FATAL_ERROR "unexpected greedy text: ${out}")
endif()
execute_process(COMMAND ${BGTQ} generate --model ${M} --tokenizer ${T} --prompt "Once upon a time" --steps 5 --json
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "generate --json failed (${rc}): ${err}")
endif()
string(JSON text GET "${out}" text)
string(JSON ntok LENGTH "${out}" tokens)
string(JSON kv GET "${out}" kv)
if(NOT text MATCHES "^Once upon a time, there" OR NOT ntok EQUAL 5 OR NOT kv STREQUAL "fp32")
  message(FATAL_ERROR "unexpected JSON: ${out}")
endif()
