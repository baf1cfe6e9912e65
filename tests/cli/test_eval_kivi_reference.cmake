# bgtq eval's KIVI against an independent Python model of what the KIVI cache holds
# (tests/cli/kivi_reference.py: the cache's append rule replayed per query, 32-token
# key blocks after the sink quantized from fp16 rows once `recent` tokens follow them,
# the rest read in fp16). Windows: none, a sink that is not a multiple of 32 (the blocks
# must start after it: quantized from token 0 on, a block straddled the query and used
# later tokens' statistics), and a sink with a recent window. Skipped without python3.
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
find_program(PYTHON3 python3)
if(NOT PYTHON3)
  message("SKIPPED: no python3 for the reference model")
  return()
endif()
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
bgtq_run(out err rc synth --layers 1 --tokens 90 --q-heads 2 --kv-heads 1 --dim 8 --rope half --seed 5 -o ${WORK}/s --quiet)
bgtq_expect_rc(${rc} 0 "synth" "${err}")
foreach(window "0;0" "5;0" "5;3" "0;40")
  list(GET window 0 sink)
  list(GET window 1 recent)
  bgtq_run(out err rc eval --q ${WORK}/s/q.npy --k ${WORK}/s/k.npy --rope half --bits 2 --methods kivi
           --sink ${sink} --recent ${recent} --json --threads 1)
  bgtq_expect_rc(${rc} 0 "eval --sink ${sink} --recent ${recent}" "${err}")
  string(JSON from GET "${out}" config eval_from)
  string(JSON mae GET "${out}" layers 0 results kivi@2 logit_mae)
  string(JSON kl GET "${out}" layers 0 results kivi@2 kl)
  execute_process(COMMAND ${PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/kivi_reference.py ${WORK}/s/q.npy ${WORK}/s/k.npy
                          2 ${sink} ${recent} ${from}
                  OUTPUT_VARIABLE ref ERROR_VARIABLE perr RESULT_VARIABLE prc OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT prc EQUAL 0)
    message(FATAL_ERROR "kivi_reference.py failed (${prc}): ${perr}")
  endif()
  string(REPLACE " " ";" ref "${ref}")
  list(GET ref 0 ref_mae)
  list(GET ref 1 ref_kl)
  # relative 1e-9: both sum the same double products in different orders
  foreach(m mae kl)
    execute_process(COMMAND ${PYTHON3} -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); sys.exit(0 if abs(a-b) <= 1e-9*max(abs(b),1e-300) else 1)"
                            ${${m}} ${ref_${m}} RESULT_VARIABLE same)
    if(NOT same EQUAL 0)
      message(FATAL_ERROR "sink ${sink} recent ${recent}: kivi@2 ${m} ${${m}}, the reference model's ${ref_${m}}")
    endif()
  endforeach()
  message(STATUS "sink ${sink} recent ${recent}: logit MAE ${mae} (reference ${ref_mae}), KL ${kl} (${ref_kl})")
endforeach()
