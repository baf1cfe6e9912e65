# Sizes no machine holds, in the llama2.c commands (generate, ppl, capture): docs/errors.md
# section 1 and row 21. A checkpoint or tokenizer that is an endless stream (/dev/zero) is
# refused on its first bytes; a valid checkpoint whose context would need a float32 KV
# cache beyond the memory limit is capacity_exhausted naming the size, never
# std::bad_alloc. Commands run under `ulimit -v` (where the build allows it: not under
# AddressSanitizer), so that a regression fails quickly instead of filling the machine.
include(${CMAKE_CURRENT_LIST_DIR}/../errors/cli_helpers.cmake)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(M ${ERRORS_DATA}/tiny.ckpt)
set(T ${ERRORS_DATA}/tiny.tok)
file(WRITE ${WORK}/text.txt "the cat sat on the mat\nthe end\n")

# bgtq limited to 3 GB of address space
set(REAL_BGTQ ${BGTQ})
file(WRITE ${WORK}/limited.sh "#!/bin/sh\nulimit -v 3000000 || exit 99\nexec \"${REAL_BGTQ}\" \"$@\"\n")
file(CHMOD ${WORK}/limited.sh PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
execute_process(COMMAND ${WORK}/limited.sh --help OUTPUT_QUIET ERROR_QUIET RESULT_VARIABLE rc)
set(LIMITED OFF)
if(rc EQUAL 0)
  set(LIMITED ON)
  set(BGTQ ${WORK}/limited.sh)
else()
  message(STATUS "bgtq does not run under ulimit -v (a sanitizer build?): the memory-limit cases are left out")
endif()

# endless streams as the checkpoint or the tokenizer: the header is read, found bad
if(EXISTS /dev/zero)
  foreach(cmd generate ppl capture)
    set(extra)
    if(cmd STREQUAL "ppl" OR cmd STREQUAL "capture")
      list(APPEND extra --text ${WORK}/text.txt)
    endif()
    if(cmd STREQUAL "capture")
      list(APPEND extra -o ${WORK}/out_${cmd})
    endif()
    expect_failure(CMD ${cmd} RC 1 CATEGORY format_error MATCH "/dev/zero: vocab_size = 0 is invalid" DIR ${WORK}
      ABSENT ${WORK}/out_${cmd} ARGS --model /dev/zero --tokenizer ${T} ${extra} --quiet)
    expect_failure(CMD ${cmd} RC 1 CATEGORY format_error MATCH "/dev/zero: max_token_length = 0 is outside" DIR ${WORK}
      ABSENT ${WORK}/out_${cmd} ARGS --model ${M} --tokenizer /dev/zero ${extra} --quiet)
  endforeach()
endif()

# a checkpoint with trailing bytes is refused without reading them all
file(READ ${M} hex HEX)
execute_process(COMMAND sh -c "cat '${M}' > '${WORK}/trailing.ckpt' && head -c 100000 /dev/zero >> '${WORK}/trailing.ckpt'"
  RESULT_VARIABLE rc)
expect_failure(CMD generate RC 1 CATEGORY format_error MATCH "trailing.ckpt: the file holds more bytes than its header implies: expected 11324 bytes, actual 111324"
  DIR ${WORK} ARGS --model ${WORK}/trailing.ckpt --tokenizer ${T} --quiet)

# a valid checkpoint of a huge context: dim 2, hidden 1, 4096 layers, 1 head, vocab 3,
# seq_len 2^20, all weights 0 (a float32 KV cache of the whole context: 64 GiB); and a
# tokenizer of 3 one-byte tokens
set(d 2)
set(L 4096)
set(S 1048576)
math(EXPR floats "3 * ${d} + ${L} * ${d} + 4 * ${L} * ${d} * ${d} + ${L} * ${d} + 3 * ${L} * ${d} + ${d} + ${S} * ${d}")
math(EXPR bytes "4 * ${floats}")
execute_process(COMMAND sh -c
  "printf '\\002\\000\\000\\000\\001\\000\\000\\000\\000\\020\\000\\000\\001\\000\\000\\000\\001\\000\\000\\000\\003\\000\\000\\000\\000\\000\\020\\000' > '${WORK}/huge.ckpt' && head -c ${bytes} /dev/zero >> '${WORK}/huge.ckpt' && printf '\\001\\000\\000\\000\\000\\000\\000\\000\\001\\000\\000\\000a\\000\\000\\000\\000\\001\\000\\000\\000b\\000\\000\\000\\000\\001\\000\\000\\000c' > '${WORK}/huge.tok'"
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "could not write the huge-context checkpoint (sh, printf, head)")
endif()
# a short generation needs a cache of its own length only
expect_success(CMD generate ARGS --model ${WORK}/huge.ckpt --tokenizer ${WORK}/huge.tok --steps 8 --json --quiet)
if(NOT LAST_STDOUT MATCHES "\"tokens\": *\\[0, *0, *0, *0, *0, *0, *0, *0\\]")
  message(FATAL_ERROR "generate on the huge-context model: ${LAST_STDOUT}")
endif()
if(LIMITED)
  # the whole context: 2 x 4096 layers x 2^20 positions x kv_dim 2 x 4 B = 64 GiB
  expect_failure(CMD generate RC 1 CATEGORY capacity_exhausted
    MATCH "float32 KV cache .*4096 layers.*1048576 positions.*kv_dim 2.* needs 68719476736 bytes \\(64.0 GiB\\), more than the memory limit"
    DIR ${WORK} ARGS --model ${WORK}/huge.ckpt --tokenizer ${WORK}/huge.tok --steps 1048576 --quiet)
  expect_failure(CMD generate RC 1 CATEGORY capacity_exhausted MATCH "kv_cache: cannot allocate the page pool of [0-9]+ bytes"
    DIR ${WORK} ARGS --model ${WORK}/huge.ckpt --tokenizer ${WORK}/huge.tok --steps 1048576 --kv fp16 --quiet)
endif()

# generate --json: --steps 0 runs nothing and reports 0 tokens/s; --help lists every field
expect_success(CMD generate ARGS --model ${M} --tokenizer ${T} --steps 0 --json --quiet)
if(NOT LAST_STDOUT MATCHES "\"tokens\": *\\[\\]" OR NOT LAST_STDOUT MATCHES "\"tokens_per_s\": *0[,}]")
  message(FATAL_ERROR "generate --steps 0 --json: ${LAST_STDOUT}")
endif()
execute_process(COMMAND ${REAL_BGTQ} generate --help OUTPUT_VARIABLE help)
string(REGEX MATCHALL "\"[a-z_]+\":" fields "${LAST_STDOUT}")
foreach(f IN LISTS fields)
  string(REGEX REPLACE "[\":]" "" f "${f}")
  if(NOT help MATCHES "[{ ]${f}[,}]")
    message(FATAL_ERROR "generate --help does not list the --json field ${f}:\n${help}")
  endif()
endforeach()
