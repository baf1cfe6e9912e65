# CLI contract of `bgtq codebook`: JSON fields and values for one case, table output,
# and exit code 2 with a message on stderr for bad usage.
# Run by ctest with -DBGTQ=<bgtq binary> -DWORK=<scratch dir>.
if(NOT BGTQ)
  message(FATAL_ERROR "BGTQ (path of the bgtq binary) is not set")
endif()

# ---- JSON: 3 bits at n = 128 (sphere law)
execute_process(COMMAND ${BGTQ} codebook --bits 3 --dim 128 --json
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "bgtq codebook --json failed (rc=${rc}): ${err}")
endif()
string(STRIP "${out}" out)
if(NOT out MATCHES "^{\"bits\":3,\"dim\":128,\"kind\":\"sphere\",\"centroids\":\\[[^]]*\\],\"thresholds\":\\[[^]]*\\],\"mse\":[0-9.e+-]+}$")
  message(FATAL_ERROR "unexpected JSON layout: ${out}")
endif()
string(JSON bits GET "${out}" bits)
string(JSON dim GET "${out}" dim)
string(JSON kind GET "${out}" kind)
string(JSON nc LENGTH "${out}" centroids)
string(JSON nt LENGTH "${out}" thresholds)
string(JSON mse GET "${out}" mse)
if(NOT bits EQUAL 3 OR NOT dim EQUAL 128 OR NOT kind STREQUAL "sphere" OR NOT nc EQUAL 8 OR NOT nt EQUAL 7)
  message(FATAL_ERROR "wrong fields: bits=${bits} dim=${dim} kind=${kind} centroids=${nc} thresholds=${nt}")
endif()
# n*MSE at n = 128, b = 3 is 0.03397 (reference); accept 0.5%: [0.03380, 0.03414)
if(NOT mse MATCHES "^0\\.03(3[89]|40|41)[0-9]*(e[+-]?0+)?$")
  message(FATAL_ERROR "mse ${mse} is not within 0.5% of 0.03397")
endif()
# symmetric centroids: c_0 = -c_7, c_3 = -c_4; middle threshold 0; ascending
string(JSON c0 GET "${out}" centroids 0)
string(JSON c7 GET "${out}" centroids 7)
string(JSON c3 GET "${out}" centroids 3)
string(JSON c4 GET "${out}" centroids 4)
string(JSON t3 GET "${out}" thresholds 3)
if(NOT c0 STREQUAL "-${c7}" OR NOT c3 STREQUAL "-${c4}" OR NOT t3 MATCHES "^-?0$")
  message(FATAL_ERROR "codebook is not symmetric: c0=${c0} c7=${c7} c3=${c3} c4=${c4} t3=${t3}")
endif()
# the outer centroid of the 3-bit sphere codebook at n = 128 is about 2.15/sqrt(128) = 0.19
if(NOT c7 MATCHES "^0\\.1[89][0-9]*$")
  message(FATAL_ERROR "outer centroid ${c7} is not about 0.19")
endif()

# ---- other kinds and the table output
execute_process(COMMAND ${BGTQ} codebook --bits 2 --dim 8 --kind uniform --json
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(JSON kind GET "${out}" kind)
if(NOT rc EQUAL 0 OR NOT kind STREQUAL "uniform")
  message(FATAL_ERROR "--kind uniform failed (rc=${rc}): ${out} ${err}")
endif()
execute_process(COMMAND ${BGTQ} codebook --bits 4 --dim 2 --kind gaussian
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "index +centroid +threshold" OR NOT out MATCHES "n\\*MSE")
  message(FATAL_ERROR "table output failed (rc=${rc}): ${out} ${err}")
endif()

# ---- bad usage: exit 2, a message on stderr, nothing on stdout
foreach(bad
    "--bits;0;--dim;128"
    "--bits;9;--dim;128"
    "--bits;3;--dim;1"
    "--bits;3;--dim;65537"
    "--bits;3;--dim;128;--kind;laplace"
    "--dim;128"
    "--bits;3"
    "--bits;x;--dim;128"
    "--bits;3;--dim;128;--frobnicate;1")
  execute_process(COMMAND ${BGTQ} codebook ${bad} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 2)
    message(FATAL_ERROR "bgtq codebook ${bad}: expected exit 2, got ${rc} (${err})")
  endif()
  string(STRIP "${err}" err)
  if(err STREQUAL "" OR NOT out STREQUAL "")
    message(FATAL_ERROR "bgtq codebook ${bad}: expected a message on stderr only (stdout='${out}')")
  endif()
endforeach()
message(STATUS "bgtq codebook: CLI contract ok")
