# llama2c_generate with a bad steps argument: exit 2 and a message naming it, for each of
# "abc", "12x", "-1" and "" (the model and tokenizer paths are never opened)
foreach(steps "abc" "12x" "-1" "")
  execute_process(COMMAND ${PROG} no-model.bin no-tokenizer.bin "prompt" "${steps}"
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "steps '${steps}' is not a whole number")
    message(FATAL_ERROR "llama2c_generate with steps '${steps}': exit ${rc}, stderr: ${err}")
  endif()
endforeach()
