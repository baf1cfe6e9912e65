# `bgtq demo` (what `make demo` runs): it completes without the real-data folder, and its
# fidelity table (part 3) agrees with `bgtq eval` run on the same activations (`bgtq synth`
# with the demo's shape and seed) at 3 bits: bytes per token and KV head as the cache
# stores them, logit MAE, softmax KL and attention-output error of TQ-MSE, Block-GTQ and
# KIVI, each to the demo's printed precision. The speed part runs at its smallest size.
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})

bgtq_run(demo err rc demo --data ${WORK}/no_data --speed-tokens 1024)
bgtq_expect_rc(${rc} 0 "demo" "${err}")
bgtq_expect_match("${demo}" "5\\. real model: [^\n]*/no_data/stories260K not found, skipped" "demo without the data folder")
# part 4: the packed kernel against its double-precision reference, and the cache's size
# (a relative error printed %.1e: below 1e-5 on every SIMD path, 5.5e-07 on AVX-512 here)
if(NOT demo MATCHES "max error ([0-9])\\.([0-9])e([-+][0-9]+) of max \\|out\\|")
  message(FATAL_ERROR "demo: no packed-attention error line:\n${demo}")
endif()
if(NOT (CMAKE_MATCH_3 LESS -5 OR (CMAKE_MATCH_1 EQUAL 0 AND CMAKE_MATCH_2 EQUAL 0)))
  message(FATAL_ERROR "demo: packed attention vs its reference: max error ${CMAKE_MATCH_1}.${CMAKE_MATCH_2}e${CMAKE_MATCH_3}, expected below 1e-5")
endif()
bgtq_expect_match("${demo}" "Block-GTQ K3V3 +0\\.8 MiB +[0-9.]+ ms/step +4\\.[6-9][0-9]x smaller" "demo: paged cache size")

bgtq_run(out err rc synth --layers 2 --tokens 1024 --q-heads 32 --kv-heads 8 --dim 128 --rope half --seed 1 -o ${WORK}/s --quiet)
bgtq_expect_rc(${rc} 0 "synth" "${err}")
bgtq_run(eval err rc eval --q ${WORK}/s/q.npy --k ${WORK}/s/k.npy --v ${WORK}/s/v.npy --rope half --bits 3
  --methods tq,bgtq,kivi --json --quiet)
bgtq_expect_rc(${rc} 0 "eval" "${err}")

# a non-negative decimal (the demo's %.Nf, or a JSON number: %.17g, so an exponent for
# values below 1e-4) in millionths, truncated; exponents below -6 read as 0
function(to_micro value out)
  if(NOT value MATCHES "^([0-9]+)(\\.([0-9]*))?([eE]([-+]?[0-9]+))?$")
    message(FATAL_ERROR "not a non-negative decimal: '${value}'")
  endif()
  set(int ${CMAKE_MATCH_1})
  set(digits "${CMAKE_MATCH_3}")
  if(CMAKE_MATCH_4)
    set(e ${CMAKE_MATCH_5})
    if(e LESS -6)
      set(${out} 0 PARENT_SCOPE)
      return()
    elseif(NOT e LESS 0 OR NOT int EQUAL 0 AND NOT int LESS 10)
      message(FATAL_ERROR "to_micro: '${value}' is out of this test's range")
    endif()
    # d.ddd e-k (1 <= k <= 6): the fraction is k - 1 zeros, then the digits
    math(EXPR zeros "-${e} - 1")
    string(REPEAT "0" ${zeros} pad)
    set(digits "${pad}${int}${digits}")
    set(int 0)
  endif()
  string(SUBSTRING "${digits}000000" 0 6 frac)
  string(REGEX REPLACE "^0+([0-9])" "\\1" frac "${frac}")
  math(EXPR v "${int} * 1000000 + ${frac}")
  set(${out} ${v} PARENT_SCOPE)
endfunction()
# demo's printed `shown` against eval's `exact`, within half a unit of the last printed digit
function(expect_close what shown exact half_unit)
  to_micro(${shown} a)
  to_micro(${exact} b)
  math(EXPR d "${a} - ${b}")
  if(d LESS 0)
    math(EXPR d "-${d}")
  endif()
  if(d GREATER ${half_unit})
    message(FATAL_ERROR "demo ${what}: ${shown}, bgtq eval on the same activations: ${exact}")
  endif()
  message(STATUS "demo ${what}: ${shown} (eval ${exact})")
endfunction()

foreach(row "TQ-MSE  K3V3|tq@3" "Block-GTQ K3V3|bgtq@3" "KIVI    K3V3|kivi@3")
  string(REPLACE "|" ";" row "${row}")
  list(GET row 0 name)
  list(GET row 1 key)
  # cache  B/tok/hd  vs fp16  logit MAE  softmax KL  out rel err
  if(NOT demo MATCHES "\n   ${name} +([0-9.]+) +[0-9.]+x +([0-9.]+) +([0-9.]+) +([0-9.]+)\n")
    message(FATAL_ERROR "demo: no fidelity row for ${name}:\n${demo}")
  endif()
  set(bytes ${CMAKE_MATCH_1})
  set(mae ${CMAKE_MATCH_2})
  set(kl ${CMAKE_MATCH_3})
  set(out ${CMAKE_MATCH_4})
  string(JSON e_bytes GET "${eval}" summary mean ${key} bytes_per_token)
  string(JSON e_mae GET "${eval}" summary mean ${key} logit_mae)
  string(JSON e_kl GET "${eval}" summary mean ${key} kl)
  string(JSON e_out GET "${eval}" summary mean ${key} out_rel_l2)
  expect_close("${key} bytes per token" ${bytes} ${e_bytes} 50001)  # %.1f
  expect_close("${key} logit MAE" ${mae} ${e_mae} 51)               # %.4f
  expect_close("${key} softmax KL" ${kl} ${e_kl} 6)                  # %.5f
  expect_close("${key} output error" ${out} ${e_out} 51)            # %.4f
endforeach()
