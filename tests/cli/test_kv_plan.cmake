# --kv plan:FILE in the llama2.c commands (ppl, generate): the path from bgtq capture
# through bgtq calibrate to a cache built from the saved plan, on the tiny checkpoint of
# tests/errors/data (1 layer, 2 query / 1 KV head, head_dim 4). The plan is used as is
# (its widths and value bits, its bytes), a plan calibrated on the text ppl holds out
# equals ppl's own Block-GTQ at the same budget (and one with another seed does not: the
# file is used, not recalibrated), and a plan for another model or no plan is refused
# before anything runs.
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/../errors/cli_helpers.cmake)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(M ${ERRORS_DATA}/tiny.ckpt)
set(T ${ERRORS_DATA}/tiny.tok)
file(WRITE ${WORK}/text.txt "the cat sat on the mat\nthe end of the day the cat sat\nthe mat sat on the cat\n")
# ppl holds out the first two documents to calibrate on (--calib-docs 2): capture them
file(WRITE ${WORK}/calib.txt "the cat sat on the mat\nthe end of the day the cat sat\n")
set(model --model ${M} --tokenizer ${T})

expect_success(CMD capture ARGS ${model} --text ${WORK}/calib.txt -o ${WORK}/cap --quiet)
foreach(p "3;--avg-bits;3" "3s7;--avg-bits;3;--seed;7" "25;--avg-bits;2.5;--value-bits;1")
  list(POP_FRONT p name)
  bgtq_run(out err rc calibrate --q ${WORK}/cap/q.npy --k ${WORK}/cap/k.npy --rope interleaved ${p} -o ${WORK}/p${name}.bin
           --json --quiet)
  bgtq_expect_rc(${rc} 0 "calibrate ${p}" "${err}")
  string(JSON bytes${name} GET "${out}" key_bytes_per_token)
  string(JSON vbytes GET "${out}" value_bytes_per_token)
  # (whole bytes at head_dim 4: 2 B of radius per group and 4 * bits / 8 B of codes)
  math(EXPR bytes${name} "${bytes${name}} + ${vbytes}")
endforeach()

bgtq_run(out err rc ppl ${model} --text ${WORK}/text.txt
         --kv "bgtq3, plan:${WORK}/p3.bin ,plan:${WORK}/p25.bin,tq2,plan:${WORK}/p3s7.bin" --json --quiet)
bgtq_expect_rc(${rc} 0 "ppl --kv plan:..." "${err}")
foreach(i 0 1 2 3 4)
  string(JSON kv${i} GET "${out}" results ${i} kv)
  string(JSON ppl${i} GET "${out}" results ${i} ppl)
  string(JSON kl${i} GET "${out}" results ${i} kl)
  string(JSON b${i} GET "${out}" results ${i} bytes_per_token_per_head)
endforeach()
if(NOT kv1 STREQUAL "plan:${WORK}/p3.bin")
  message(FATAL_ERROR "ppl names the cache '${kv1}', not as given")
endif()
# calibrated on the same tokens with the same options: the same cache, the same figures
if(NOT ppl1 STREQUAL ppl0 OR NOT kl1 STREQUAL kl0 OR NOT b1 EQUAL b0 OR NOT b1 EQUAL bytes3)
  message(FATAL_ERROR "plan:p3.bin gave ppl ${ppl1}, KL ${kl1}, ${b1} B; bgtq3 ${ppl0}, ${kl0}, ${b0} B (calibrate: ${bytes3} B)")
endif()
# the seed-7 plan: the same widths and bytes, other rotations, other figures (a cache
# recalibrated at the file's budget would give bgtq3's)
if(NOT b4 EQUAL bytes3s7 OR NOT b4 EQUAL b0 OR ppl4 STREQUAL ppl0)
  message(FATAL_ERROR "plan:p3s7.bin gave ppl ${ppl4}, ${b4} B (calibrate: ${bytes3s7} B); bgtq3 ${ppl0}, ${b0} B")
endif()
# keys 2.5 bits on average (one block at 2, one at 3), values 1 bit: its own bytes, its
# own figures (neither bgtq3's nor tq2's)
if(NOT b2 EQUAL bytes25 OR ppl2 STREQUAL ppl0 OR ppl2 STREQUAL ppl3 OR NOT kl2 GREATER 0)
  message(FATAL_ERROR "plan:p25.bin: ppl ${ppl2}, KL ${kl2}, ${b2} B (calibrate: ${bytes25} B); bgtq3 ${ppl0}, tq2 ${ppl3}")
endif()
# a path with a space in it is the file named (a list item loses only its outer spaces)
file(COPY_FILE ${WORK}/p25.bin "${WORK}/my plans.bin")
bgtq_run(out err rc ppl ${model} --text ${WORK}/text.txt --kv "plan:${WORK}/my plans.bin" --json --quiet)
bgtq_expect_rc(${rc} 0 "ppl --kv 'plan:my plans.bin'" "${err}")
string(JSON ppl_spaced GET "${out}" results 0 ppl)
if(NOT ppl_spaced STREQUAL ppl2)
  message(FATAL_ERROR "plan:'my plans.bin' (a copy of p25.bin): ppl ${ppl_spaced}, p25.bin's ${ppl2}")
endif()
expect_success(CMD generate ARGS ${model} --prompt "the cat" --steps 4 --kv plan:${WORK}/p25.bin --json --quiet)
string(JSON gb GET "${LAST_STDOUT}" kv_bytes_per_token_per_head)
if(NOT gb EQUAL bytes25)
  message(FATAL_ERROR "generate --kv plan:p25.bin: ${gb} bytes per token, calibrate's ${bytes25}")
endif()
# generate's one cache loses its outer spaces, as ppl's list items do
expect_success(CMD generate ARGS ${model} --prompt "the cat" --steps 2 --kv " plan:${WORK}/p25.bin " --json --quiet)
string(JSON gkv GET "${LAST_STDOUT}" kv)
if(NOT gkv STREQUAL "plan:${WORK}/p25.bin")
  message(FATAL_ERROR "generate --kv ' plan:p25.bin ': kv '${gkv}'")
endif()

# refused before anything runs: a plan for half pairing (llama2.c rotates interleaved
# pairs: checked once the model is read, before the text, here missing, and before the
# caches of the entries before it calibrate), a missing plan, a file that is no plan (both
# read before the model, here missing), "plan:" without a file
bgtq_run(out err rc synth --layers 1 --tokens 8 --q-heads 2 --kv-heads 1 --dim 4 --rope half -o ${WORK}/half --quiet)
bgtq_expect_rc(${rc} 0 "synth" "${err}")
expect_success(CMD calibrate ARGS --q ${WORK}/half/q.npy --k ${WORK}/half/k.npy --rope half --avg-bits 3 -o ${WORK}/half.bin --quiet)
foreach(cmd ppl generate)
  set(extra --steps 2)
  set(half plan:${WORK}/half.bin)
  if(cmd STREQUAL "ppl")
    set(extra --text ${WORK}/missing.txt)
    set(half bgtq3,plan:${WORK}/half.bin)
  endif()
  expect_failure(CMD ${cmd} RC 1 CATEGORY shape_mismatch
    MATCH "--kv plan:[^ ]*/half\\.bin is a plan for 1 layer x 1 KV head \\(2 query heads\\), head_dim 4, half pairing, rotary_dim 4; the model is 1 layer x 1 KV head \\(2 query heads\\), head_dim 4, interleaved pairing, rotary_dim 4$"
    ARGS ${model} ${extra} --kv ${half} --quiet)
  set(nomodel --model ${WORK}/missing.ckpt --tokenizer ${T} ${extra})
  expect_failure(CMD ${cmd} RC 1 CATEGORY io_error MATCH "missing\\.bin" ARGS ${nomodel} --kv plan:${WORK}/missing.bin --quiet)
  expect_failure(CMD ${cmd} RC 1 CATEGORY format_error MATCH "/text\\.txt: not a blockgtq plan file"
    ARGS ${nomodel} --kv plan:${WORK}/text.txt --quiet)
  expect_failure(CMD ${cmd} RC 2 MATCH "KV cache 'plan:' names no plan file" ARGS ${model} ${extra} --kv plan:)
endforeach()

# On the real stories260K model (when ../shared/data is there; 4 RoPE blocks per head, so
# the plan is not uniform): capture the two documents ppl holds out, calibrate at 3 bits,
# and the plan file gives bgtq3's figures exactly, which tq3's are not
set(S ${DATA}/stories260K)
foreach(f stories260K.bin tok512.bin sample_text.txt)
  if(NOT EXISTS ${S}/${f})
    message(STATUS "real-data part skipped: ${S}/${f} is absent")
    return()
  endif()
endforeach()
file(READ ${S}/sample_text.txt text)  # its first two lines (documents), as they are
string(REGEX MATCH "^[^\n]*\n[^\n]*\n" first_two "${text}")
file(WRITE ${WORK}/st_calib.txt "${first_two}")
set(model --model ${S}/stories260K.bin --tokenizer ${S}/tok512.bin)
expect_success(CMD capture ARGS ${model} --text ${WORK}/st_calib.txt -o ${WORK}/st --quiet)
expect_success(CMD calibrate ARGS --q ${WORK}/st/q.npy --k ${WORK}/st/k.npy --rope interleaved --avg-bits 3 -o ${WORK}/st3.bin --quiet)
bgtq_run(out err rc ppl ${model} --text ${S}/sample_text.txt --docs 3 --kv bgtq3,plan:${WORK}/st3.bin,tq3 --json --quiet)
bgtq_expect_rc(${rc} 0 "ppl on stories260K" "${err}")
foreach(i 0 1 2)
  string(JSON ppl${i} GET "${out}" results ${i} ppl)
  string(JSON kl${i} GET "${out}" results ${i} kl)
endforeach()
if(NOT ppl1 STREQUAL ppl0 OR NOT kl1 STREQUAL kl0 OR ppl2 STREQUAL ppl0)
  message(FATAL_ERROR "stories260K: plan ppl ${ppl1} KL ${kl1}, bgtq3 ${ppl0} ${kl0}, tq3 ${ppl2}")
endif()
message(STATUS "stories260K, 3 documents: bgtq3 and the plan file ppl ${ppl0}, tq3 ${ppl2}")
