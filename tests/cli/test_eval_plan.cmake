# bgtq eval --plan: a plan file from bgtq calibrate, evaluated as the method "plan" beside
# the others. The same plan as eval's own bgtq@3 (calibrated on the same 128 tokens with
# the same options) gives the same figures, bit for bit; a fractional budget is evaluated
# at its own bytes; a plan for another model, or a file that is no plan, is refused
# before the work, with nothing written.
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/../errors/cli_helpers.cmake)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(R ${WORK}/r.json)

bgtq_run(out err rc synth --layers 2 --tokens 256 --q-heads 8 --kv-heads 2 --dim 32 --rope half --seed 3 -o ${WORK}/s --quiet)
bgtq_expect_rc(${rc} 0 "synth" "${err}")
set(qkv --q ${WORK}/s/q.npy --k ${WORK}/s/k.npy --v ${WORK}/s/v.npy --rope half)

# eval calibrates its bgtq@3 on the first T/2 = 128 tokens with the default options:
# calibrate does the same here
expect_success(CMD calibrate ARGS --q ${WORK}/s/q.npy --k ${WORK}/s/k.npy --rope half --tokens 128 --avg-bits 3
  -o ${WORK}/p3.bin --quiet)
bgtq_run(out err rc eval ${qkv} --bits 3 --methods tq,bgtq --plan ${WORK}/p3.bin --json --quiet)
bgtq_expect_rc(${rc} 0 "eval --plan p3.bin" "${err}")
if(err MATCHES "warning")  # calibrated on the 128 tokens before the split: nothing to say
  message(FATAL_ERROR "eval --plan p3.bin warned: ${err}")
endif()
string(JSON methods GET "${out}" config methods)
bgtq_expect_match("${methods}" "^\\[ *\"tq\", *\"bgtq\", *\"plan\" *\\]$" "--plan alone appends the method plan")
foreach(field path avg_bits value_bits calib_tokens)
  string(JSON ${field} GET "${out}" config plan ${field})
endforeach()
if(NOT path STREQUAL "${WORK}/p3.bin" OR NOT avg_bits EQUAL 3 OR NOT value_bits EQUAL 3 OR NOT calib_tokens EQUAL 128)
  message(FATAL_ERROR "config.plan: ${path} ${avg_bits} ${value_bits} ${calib_tokens}")
endif()
foreach(l 0 1)
  foreach(metric logit_mae kl top10 out_rel_l2 key_bytes_per_token value_bytes_per_token)
    string(JSON a GET "${out}" layers ${l} results bgtq@3 ${metric})
    string(JSON b GET "${out}" layers ${l} results plan ${metric})
    string(JSON t GET "${out}" layers ${l} results tq@3 ${metric})
    if(NOT a STREQUAL b)
      message(FATAL_ERROR "layer ${l}: plan ${metric} ${b}, bgtq@3's ${a}: the same plan gave other figures")
    endif()
    if(metric STREQUAL "logit_mae" AND a STREQUAL t)
      message(FATAL_ERROR "layer ${l}: bgtq@3 and tq@3 have the same logit MAE ${a}: the check above proves nothing")
    endif()
  endforeach()
endforeach()
# its comparison with tq@3 at the same budget is bgtq@3's
foreach(field bits logit_mae_reduction kl_reduction layers_won layers)
  string(JSON a GET "${out}" summary bgtq_vs_tq 0 ${field})
  string(JSON b GET "${out}" summary plan_vs_tq 0 ${field})
  if(NOT a STREQUAL b)
    message(FATAL_ERROR "summary: plan_vs_tq ${field} ${b}, bgtq_vs_tq's ${a}")
  endif()
endforeach()
# --methods may place it; with fp16 only and the plan, no calibration is needed, and the
# text report names the plan and compares it with nothing
bgtq_run(out err rc eval ${qkv} --methods plan,fp16 --plan ${WORK}/p3.bin --quiet)
bgtq_expect_rc(${rc} 0 "eval --methods plan,fp16" "${err}")
bgtq_expect_match("${out}" "\nplan: [^\n]*/p3\\.bin \\(keys: a budget of 3 bits on average, widths averaging 3; values 3 bits; calibrated on 128 tokens\\)\n"
                  "text report's plan line")
bgtq_expect_match("${out}" "^eval: 2 layers, T=256 \\(evaluated from token 128, --calib-tokens' split;" "nothing calibrates: the header says so")

bgtq_expect_match("${out}" "\nplan +[0-9.e-]+ +[0-9.e-]+ +[0-9.]+ +[0-9.e-]+ +[0-9.]+ +[0-9.]+x\nfp16 " "plan's row, then fp16's")
if(out MATCHES "vs uniform TQ-MSE")
  message(FATAL_ERROR "a comparison without tq: ${out}")
endif()

# the plan's own options are the file's, not eval's: a plan made with another seed and
# --norm-correction differs from bgtq@3 unless eval is given the same options
expect_success(CMD calibrate ARGS --q ${WORK}/s/q.npy --k ${WORK}/s/k.npy --rope half --tokens 128 --avg-bits 3
  --seed 7 --norm-correction -o ${WORK}/p3s.bin --quiet)
foreach(same OFF ON)
  set(opts)
  if(same)
    set(opts --seed 7 --norm-correction)
  endif()
  bgtq_run(out err rc eval ${qkv} --bits 3 --methods bgtq --plan ${WORK}/p3s.bin ${opts} --json --quiet)
  bgtq_expect_rc(${rc} 0 "eval --plan p3s.bin ${opts}" "${err}")
  string(JSON a GET "${out}" summary mean bgtq@3 logit_mae)
  string(JSON b GET "${out}" summary mean plan logit_mae)
  if(same AND NOT a STREQUAL b)
    message(FATAL_ERROR "seed 7, norm correction: plan's logit MAE ${b}, bgtq@3's with the same options ${a}")
  elseif(NOT same AND a STREQUAL b)
    message(FATAL_ERROR "seed 7, norm correction: plan's logit MAE ${b} is bgtq@3's with eval's defaults: the file's options were not used")
  endif()
endforeach()

# a fractional budget (keys 2.5 bits on average, values 2 bits): its bytes are those
# calibrate reports for it (the key groups' radii make its key bytes more than tq@3's at
# D = 32), and it is compared with no width (its budget is theirs at none)
bgtq_run(cal err rc calibrate --q ${WORK}/s/q.npy --k ${WORK}/s/k.npy --rope half --avg-bits 2.5 --value-bits 2
  -o ${WORK}/p25.bin --json --quiet)
bgtq_expect_rc(${rc} 0 "calibrate 2.5" "${err}")
bgtq_run(out err rc eval ${qkv} --bits 2,3 --methods tq --plan ${WORK}/p25.bin --eval-all --json --quiet)
bgtq_expect_rc(${rc} 0 "eval --plan p25.bin" "${err}")
foreach(part key value)
  string(JSON want GET "${cal}" ${part}_bytes_per_token)
  string(JSON got GET "${out}" summary mean plan ${part}_bytes_per_token)
  string(JSON tq3 GET "${out}" summary mean tq@3 ${part}_bytes_per_token)
  if(got GREATER want OR got LESS want OR (part STREQUAL "key" AND NOT got GREATER tq3))
    message(FATAL_ERROR "plan at K2.5 V2: ${part} bytes ${got}, calibrate's ${want} (tq@3's ${tq3})")
  endif()
endforeach()
string(JSON mean_bits GET "${out}" config plan mean_key_bits)
if(NOT mean_bits STREQUAL "2.5")
  message(FATAL_ERROR "K2.5 V2: mean key width ${mean_bits}, expected 2.5")
endif()
string(JSON n LENGTH "${out}" summary plan_vs_tq)
string(JSON from GET "${out}" config eval_from)
if(NOT n EQUAL 0 OR NOT from EQUAL 0)
  message(FATAL_ERROR "K2.5 V2: ${n} comparisons (expected none), eval_from ${from}")
endif()

# a budget --b-max caps (4 bits asked, at most 3 per block): the mean width says so; and
# values at 0 bits store nothing and decode to zero (an output error of exactly 1)
expect_success(CMD calibrate ARGS --q ${WORK}/s/q.npy --k ${WORK}/s/k.npy --rope half --avg-bits 4 --b-max 3
  --value-bits 0 -o ${WORK}/p4c.bin --quiet)
bgtq_run(out err rc eval ${qkv} --methods plan --plan ${WORK}/p4c.bin --json --quiet)
bgtq_expect_rc(${rc} 0 "eval --plan p4c.bin" "${err}")
# calibrate's default took all 256 tokens: the plan's queries after the split are among them
bgtq_expect_match("${err}" "warning: --plan [^ ]*/p4c\\.bin was calibrated on 256 tokens and the evaluation starts at token 128: if the plan came from these dumps [^\n]*; these dumps have no token after them"
                  "eval --plan of a plan calibrated on the whole dump")
string(JSON budget GET "${out}" config plan avg_bits)
string(JSON mean_bits GET "${out}" config plan mean_key_bits)
string(JSON vbytes GET "${out}" summary mean plan value_bytes_per_token)
string(JSON rel GET "${out}" summary mean plan out_rel_l2)
if(NOT budget EQUAL 4 OR NOT mean_bits EQUAL 3 OR NOT vbytes EQUAL 0 OR NOT rel EQUAL 1)
  message(FATAL_ERROR "K4 capped at 3, V0: budget ${budget}, mean width ${mean_bits}, value bytes ${vbytes}, output error ${rel}")
endif()

# a plan calibrated on 192 tokens evaluated from the default split (128) is warned about,
# naming the split that holds its calibration out; with that split, or --eval-all (every
# query asked for), nothing is said
expect_success(CMD calibrate ARGS --q ${WORK}/s/q.npy --k ${WORK}/s/k.npy --rope half --tokens 192 --avg-bits 3
  -o ${WORK}/p192.bin --quiet)
bgtq_run(out err rc eval ${qkv} --methods plan --plan ${WORK}/p192.bin --quiet)
bgtq_expect_rc(${rc} 0 "eval --plan p192.bin" "${err}")
bgtq_expect_match("${err}" "warning: --plan [^ ]*/p192\\.bin was calibrated on 192 tokens and the evaluation starts at token 128: [^\n]*; --calib-tokens 192 evaluates only the tokens after them\n$"
                  "eval --plan of a plan calibrated past the split")
foreach(split "--calib-tokens;192" "--calib-tokens;200" "--eval-all")
  bgtq_run(out err rc eval ${qkv} --methods plan --plan ${WORK}/p192.bin ${split} --quiet)
  bgtq_expect_rc(${rc} 0 "eval --plan p192.bin ${split}" "${err}")
  if(err MATCHES "warning")
    message(FATAL_ERROR "eval --plan p192.bin ${split} warned: ${err}")
  endif()
endforeach()

# refused before the work, nothing written: a plan for another model (here 4 KV heads, or
# interleaved pairing), --methods plan without a plan, a plan file that is missing or no
# plan (read before the dumps: the missing --k is not what is reported), -o over the plan
bgtq_run(out err rc synth --layers 2 --tokens 64 --q-heads 8 --kv-heads 4 --dim 32 --rope half --seed 3 -o ${WORK}/h4 --quiet)
bgtq_expect_rc(${rc} 0 "synth 4 KV heads" "${err}")
set(shape "2 layers x 2 KV heads \\(8 query heads\\), head_dim 32, half pairing, rotary_dim 32")
expect_failure(CMD eval RC 1 CATEGORY shape_mismatch DIR ${WORK} ABSENT ${R}
  MATCH "--plan [^ ]*/p3\\.bin is a plan for ${shape}; the dumps \\(with --rope and --rotary-dim\\) are 2 layers x 4 KV heads \\(8 query heads\\)"
  ARGS --q ${WORK}/h4/q.npy --k ${WORK}/h4/k.npy --rope half --plan ${WORK}/p3.bin --quiet -o ${R})
expect_failure(CMD eval RC 1 CATEGORY shape_mismatch DIR ${WORK} ABSENT ${R}
  MATCH "is a plan for ${shape}; the dumps [^;]* are 2 layers x 2 KV heads \\(8 query heads\\), head_dim 32, interleaved pairing"
  ARGS --q ${WORK}/s/q.npy --k ${WORK}/s/k.npy --rope interleaved --plan ${WORK}/p3.bin --quiet -o ${R})
expect_failure(CMD eval RC 1 CATEGORY shape_mismatch DIR ${WORK} ABSENT ${R} MATCH "half pairing, rotary_dim 16$"
  ARGS ${qkv} --rotary-dim 16 --plan ${WORK}/p3.bin --quiet -o ${R})
expect_failure(CMD eval RC 2 MATCH "--methods plan needs --plan PLAN" DIR ${WORK} ABSENT ${R}
  ARGS ${qkv} --methods tq,plan -o ${R})
expect_failure(CMD eval RC 1 CATEGORY io_error MATCH "missing\\.bin" DIR ${WORK} ABSENT ${R}
  ARGS --q ${WORK}/s/q.npy --k ${WORK}/missing.npy --rope half --plan ${WORK}/missing.bin --quiet -o ${R})
expect_failure(CMD eval RC 1 CATEGORY format_error MATCH "/s/k\\.npy: " DIR ${WORK} ABSENT ${R}
  ARGS --q ${WORK}/s/q.npy --k ${WORK}/missing.npy --rope half --plan ${WORK}/s/k.npy --quiet -o ${R})
file(READ ${WORK}/p3.bin before HEX)
expect_failure(CMD eval RC 2 MATCH "-o [^ ]*/p3\\.bin' is the input --plan \\(the output would replace it\\)" DIR ${WORK}
  ARGS ${qkv} --plan ${WORK}/p3.bin -o ${WORK}/p3.bin)
file(READ ${WORK}/p3.bin after HEX)
if(NOT before STREQUAL after)
  message(FATAL_ERROR "eval -o over its --plan changed the plan file")
endif()
