# Bad-input contract of `bgtq eval` (docs/errors.md rows 1-3, 5, 21 through the CLI):
# one line, exit 1 or 2, no result file (-o) written on failure.
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/../errors/cli_helpers.cmake)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(D ${ERRORS_DATA})
set(R ${WORK}/r.json)

expect_success(CMD eval ARGS --q ${D}/q.npy --k ${D}/k.npy --v ${D}/v.npy --rope half --bits 2 --methods tq,bgtq --quiet -o ${WORK}/ok.json)
if(NOT EXISTS ${WORK}/ok.json)
  message(FATAL_ERROR "sanity eval wrote no result")
endif()

# shapes that do not match (row 5): K against Q, V against K
foreach(bad k_d6 k_t8 k_l2 k_h3)
  # the message names the mismatching file first, then Q's file and both shapes ('q.npy' alone
  # matched a message that blamed the wrong file)
  set(want "/${bad}\\.npy: K has shape \\[L=[0-9]+,T=[0-9]+,H=1,D=[0-9]+\\] but [^ ]*/q\\.npy has \\[L=1,T=9,H=2,D=8\\]$")
  if(bad STREQUAL "k_h3")
    set(want "query heads 2 \\([^)]*/q\\.npy\\) are not a multiple of KV heads 3 \\([^)]*/k_h3\\.npy\\)$")
  endif()
  expect_failure(CMD eval RC 1 CATEGORY shape_mismatch MATCH "${want}" DIR ${WORK} ABSENT ${R}
    ARGS --q ${D}/q.npy --k ${D}/${bad}.npy --v ${D}/v.npy --rope half --quiet -o ${R})
endforeach()
expect_failure(CMD eval RC 1 CATEGORY shape_mismatch MATCH "/v_h2\\.npy: V has 2 heads but K has 1" DIR ${WORK} ABSENT ${R}
  ARGS --q ${D}/q.npy --k ${D}/k.npy --v ${D}/v_h2.npy --rope half --quiet -o ${R})
# NaN-laden (row 3) and truncated (row 1) .npy
expect_failure(CMD eval RC 1 CATEGORY non_finite MATCH "k_nan.npy: element \\[0, 4, 0, 3\\]" DIR ${WORK} ABSENT ${R}
  ARGS --q ${D}/q.npy --k ${D}/k_nan.npy --rope half --quiet -o ${R})
expect_failure(CMD eval RC 1 CATEGORY format_error MATCH "/k_truncated\\.npy: data is shorter than the shape says" DIR ${WORK} ABSENT ${R}
  ARGS --q ${D}/q.npy --k ${D}/k_truncated.npy --rope half --quiet -o ${R})
expect_failure(CMD eval RC 1 CATEGORY format_error MATCH "/tiny\\.tok: not a \\.npy file: bad magic" DIR ${WORK} ABSENT ${R}
  ARGS --q ${D}/q.npy --k ${D}/tiny.tok --rope half --quiet -o ${R})
# bad usage (row 6): widths outside 1..8 for a method, unknown method or pairing
expect_failure(CMD eval RC 2 MATCH "--bits entries must be in 1..8, got 9" DIR ${WORK} ABSENT ${R}
  ARGS --q ${D}/q.npy --k ${D}/k.npy --rope half --bits 2,9 -o ${R})
# the option and the value are named ('--rope' alone matched '--rope-base' too)
expect_failure(CMD eval RC 2 MATCH "^bgtq eval: --rope: unknown RoPE pairing 'sideways'" DIR ${WORK} ABSENT ${R}
  ARGS --q ${D}/q.npy --k ${D}/k.npy --rope sideways -o ${R})
# --value-bits is calibrate's: eval codes K and V at each --bits width (not silently ignored)
expect_failure(CMD eval RC 2 MATCH "--value-bits is a calibrate option" DIR ${WORK} ABSENT ${R}
  ARGS --q ${D}/q.npy --k ${D}/k.npy --rope half --value-bits 2 -o ${R})
# a --bits width below --b-min (row 7): the budget of that plan is infeasible; the error
# names which (tq's uniform plan needs no allocation and is fine), before the dumps are
# read (the missing --k is not what is reported)
expect_failure(CMD eval RC 1 CATEGORY infeasible
  MATCH "error \\(infeasible\\): bgtq@1: --bits 1 is below --b-min 2: every block takes at least 2 bits, so no plan averages 1 \\(B = floor"
  DIR ${WORK} ABSENT ${R} ARGS --q ${D}/q.npy --k ${WORK}/missing.npy --rope half --bits 3,1 --b-min 2 --methods tq,bgtq --quiet -o ${R})
expect_success(CMD eval ARGS --q ${D}/q.npy --k ${D}/k.npy --rope half --bits 3,1 --b-min 2 --methods tq --quiet -o ${WORK}/tq_only.json)
# --threads and --eval-queries out of range
expect_failure(CMD eval RC 2 MATCH "--threads 0 is out of range" DIR ${WORK} ABSENT ${R}
  ARGS --q ${D}/q.npy --k ${D}/k.npy --rope half --threads 0 -o ${R})
expect_failure(CMD eval RC 2 MATCH "--eval-queries -3 is out of range" DIR ${WORK} ABSENT ${R}
  ARGS --q ${D}/q.npy --k ${D}/k.npy --rope half --eval-queries -3 -o ${R})
# -o glued to its path (eval's -o is optional, so it is an unexpected argument): how to write it
expect_failure(CMD eval RC 2 MATCH "unexpected argument '-o[^']*r.json' \\(.*write -o and its value as two arguments, -o [^ ]*r.json\\)"
  DIR ${WORK} ABSENT ${R} ARGS --q ${D}/q.npy --k ${D}/k.npy --rope half -o${R})
# a mistyped option: the known option it is close to is named
expect_failure(CMD eval RC 2 MATCH "unknown option --bit \\(did you mean --bits\\?\\)" DIR ${WORK} ABSENT ${R}
  ARGS --q ${D}/q.npy --k ${D}/k.npy --rope half --bit 3 -o ${R})
expect_failure(CMD eval RC 2 MATCH "unknown option --zzz$" DIR ${WORK} ABSENT ${R}
  ARGS --q ${D}/q.npy --k ${D}/k.npy --rope half --zzz 3 -o ${R})
# a short name is no typo for another short one two edits away (--kv is not -o, 'did you mean -o?')
expect_failure(CMD eval RC 2 MATCH "unknown option --n$" DIR ${WORK} ABSENT ${R}
  ARGS --q ${D}/q.npy --k ${D}/k.npy --rope half --n 5 -o ${R})
# a failing run leaves an existing result file untouched
file(WRITE ${R} "old")
expect_failure(CMD eval RC 1 CATEGORY shape_mismatch DIR ${WORK}
  ARGS --q ${D}/q.npy --k ${D}/k_d6.npy --rope half --quiet -o ${R})
file(READ ${R} kept)
if(NOT kept STREQUAL "old")
  message(FATAL_ERROR "a failing eval changed the existing result file")
endif()
# an output directory that does not exist: refused at once, before the evaluation
expect_failure(CMD eval RC 1 CATEGORY io_error MATCH "-o '.*nodir/r.json': the directory '.*nodir' does not exist"
  DIR ${WORK} ABSENT ${WORK}/nodir ARGS --q ${D}/q.npy --k ${D}/k.npy --rope half -o ${WORK}/nodir/r.json)
# repeated bit widths and methods: one result each (no duplicate JSON keys)
expect_success(CMD eval ARGS --q ${D}/q.npy --k ${D}/k.npy --rope half --bits 2,2 --methods tq,tq,fp16 --quiet -o ${WORK}/dup.json)
file(READ ${WORK}/dup.json dup)
string(JSON n LENGTH "${dup}" summary mean)
if(NOT n EQUAL 2)
  message(FATAL_ERROR "eval --bits 2,2 --methods tq,tq,fp16: ${n} summary entries, want 2 (tq@2, fp16)")
endif()
# a zero-length dimension is named
expect_failure(CMD eval RC 1 CATEGORY shape_mismatch MATCH "k_t0.npy: K dimension T \\(tokens\\) of shape \\(1, 0, 1, 8\\) is 0"
  DIR ${WORK} ABSENT ${WORK}/t0.json ARGS --q ${D}/q.npy --k ${D}/k_t0.npy --rope half --quiet -o ${WORK}/t0.json)

# zero queries: both methods' logit errors and KL are 0, so the summary's change against
# uniform TQ has no base: "n/a" in the table (null in the JSON), not "+nan%"
bgtq_run(out err rc eval --q ${D}/q_zero.npy --k ${D}/k.npy --rope half --bits 2 --methods tq,bgtq --quiet)
bgtq_expect_rc("${rc}" 0 "eval on zero queries" "${err}")
bgtq_expect_match("${out}" "Block-GTQ vs uniform TQ-MSE at 2 bits: logit MAE n/a, KL n/a" "eval summary on zero queries")
# no change: with every key in the --sink window both methods read fp16's keys, so the
# change against uniform TQ is 0: "0.0%", not "-0.0%"; and singular forms for one layer,
# one query, one bit
bgtq_run(out err rc eval --q ${D}/q.npy --k ${D}/k.npy --rope half --bits 1,2 --methods tq,bgtq --sink 9 --eval-queries 1 --quiet)
bgtq_expect_rc("${rc}" 0 "eval with every key in the window" "${err}")
bgtq_expect_match("${out}" "^eval: 1 layer, T=9 \\(calibrated on 4, evaluated from token 4: 1 query, the last\\)" "eval's header, one layer and query")
bgtq_expect_match("${out}" "Block-GTQ vs uniform TQ-MSE at 1 bit: logit MAE 0\\.0%, KL 0\\.0%, wins 0/1 layer\n"
                  "eval summary of no change at 1 bit")
bgtq_expect_match("${out}" "Block-GTQ vs uniform TQ-MSE at 2 bits: logit MAE 0\\.0%, KL 0\\.0%" "eval summary of no change at 2 bits")
if(out MATCHES "-0\\.0%|1 (layers|queries|bits)")
  message(FATAL_ERROR "eval with every key in the window: a signed zero or a plural of one: ${out}")
endif()
