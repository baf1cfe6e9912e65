# On the real data (only when ../shared/data exists): Block-GTQ beats uniform TQ-MSE in
# RoPE-logit MAE on every layer of stories260K at 2 and 3 bits, and on the Llama-2-7b
# layer (calibrated and evaluated on all 66 tokens) at 2, 3 and 4 bits.
include(${CMAKE_CURRENT_LIST_DIR}/eval_common.cmake)
set(st ${DATA}/stories260K)
set(ll ${DATA}/llama2_7b_layer9)
if(NOT EXISTS ${st}/stories260K.bin OR NOT EXISTS ${ll}/q.npy)
  message(STATUS "SKIPPED: real-data folder ${DATA} is absent")
  return()
endif()
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
bgtq_run(out err rc capture --model ${st}/stories260K.bin --tokenizer ${st}/tok512.bin --text ${st}/sample_text.txt
         -o ${WORK}/st --quiet)
bgtq_expect_rc(${rc} 0 "capture" "${err}")
bgtq_run(out err rc eval --q ${WORK}/st/q.npy --k ${WORK}/st/k.npy --v ${WORK}/st/v.npy --rope interleaved --bits 2,3
         --methods tq,bgtq --json --quiet)
bgtq_expect_rc(${rc} 0 "eval stories260K" "${err}")
bgtq_expect_wins("${out}" "2;3" "stories260K")

bgtq_run(out err rc eval --q ${ll}/q.npy --k ${ll}/k.npy --v ${ll}/v.npy --rope half --calib-tokens 66 --eval-all
         --bits 2,3,4 --methods tq,bgtq --json --quiet)
bgtq_expect_rc(${rc} 0 "eval llama2_7b_layer9" "${err}")
bgtq_expect_wins("${out}" "2;3;4" "llama2_7b_layer9")
