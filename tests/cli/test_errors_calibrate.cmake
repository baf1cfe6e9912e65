# Bad-input contract of `bgtq calibrate` (docs/errors.md rows 1-3, 5, 7, 9, 21 through the
# CLI): one line, exit 1 or 2, no plan file written on failure, an old plan left intact.
include(${CMAKE_CURRENT_LIST_DIR}/../errors/cli_helpers.cmake)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(D ${ERRORS_DATA})
set(P ${WORK}/plan.bin)

expect_success(CMD calibrate ARGS --q ${D}/q.npy --k ${D}/k.npy --rope half --avg-bits 3 -o ${WORK}/ok.bin --quiet)
if(NOT EXISTS ${WORK}/ok.bin)
  message(FATAL_ERROR "sanity calibrate wrote no plan")
endif()

# shapes that do not match each other (row 5): D, tokens, layers, Hq not a multiple of Hkv
foreach(bad k_d6 k_t8 k_l2 k_h3)
  # the message names the mismatching file first, then Q's file and both shapes ('q.npy' alone
  # matched a message that blamed the wrong file)
  set(want "/${bad}\\.npy: K has shape \\[L=[0-9]+,T=[0-9]+,H=1,D=[0-9]+\\] but [^ ]*/q\\.npy has \\[L=1,T=9,H=2,D=8\\]$")
  if(bad STREQUAL "k_h3")
    set(want "query heads 2 \\([^)]*/q\\.npy\\) are not a multiple of KV heads 3 \\([^)]*/k_h3\\.npy\\)$")
  endif()
  expect_failure(CMD calibrate RC 1 CATEGORY shape_mismatch MATCH "${want}" DIR ${WORK} ABSENT ${P}
    ARGS --q ${D}/q.npy --k ${D}/${bad}.npy --rope half --avg-bits 3 -o ${P} --quiet)
endforeach()
# more layers than a plan holds (4096): refused with the file's name before the energy pass
expect_failure(CMD calibrate RC 1 CATEGORY shape_mismatch MATCH "q_l4097.npy: Q has 4097 layers; a plan holds at most 4096"
  DIR ${WORK} ABSENT ${P} ARGS --q ${D}/q_l4097.npy --k ${D}/k_l4097.npy --rope half --avg-bits 3 -o ${P} --quiet)
# NaN-laden (row 3) and truncated (row 1) .npy
expect_failure(CMD calibrate RC 1 CATEGORY non_finite MATCH "k_nan.npy: element \\[0, 4, 0, 3\\] \\(flat 35\\) is NaN"
  DIR ${WORK} ABSENT ${P} ARGS --q ${D}/q.npy --k ${D}/k_nan.npy --rope half --avg-bits 3 -o ${P} --quiet)
expect_failure(CMD calibrate RC 1 CATEGORY format_error MATCH "k_truncated.npy: data is shorter than the shape says.*needs 288 bytes.*has 281"
  DIR ${WORK} ABSENT ${P} ARGS --q ${D}/q.npy --k ${D}/k_truncated.npy --rope half --avg-bits 3 -o ${P} --quiet)
expect_failure(CMD calibrate RC 1 CATEGORY io_error MATCH "cannot open '[^']*/missing\\.npy'" DIR ${WORK} ABSENT ${P}
  ARGS --q ${D}/q.npy --k ${WORK}/missing.npy --rope half --avg-bits 3 -o ${P} --quiet)
# infeasible budget (row 7): an average below --b-min is refused before the dumps are read
# (the missing --q is not what is reported); one within 1e-6 of --b-min reaches the
# allocator's own check, which names B and L
expect_failure(CMD calibrate RC 1 CATEGORY infeasible
  MATCH ": --avg-bits 1.5 is below --b-min 2: every block takes at least 2 bits, so no plan averages 1.5 \\(B = floor\\(avg_bits \\* L\\) < L \\* b_min for every number of blocks L\\)$"
  DIR ${WORK} ABSENT ${P} ARGS --q ${WORK}/missing.npy --k ${D}/k.npy --rope half --avg-bits 1.5 --b-min 2 -o ${P} --quiet)
expect_failure(CMD calibrate RC 1 CATEGORY infeasible MATCH "B = 7 is infeasible: L = 4 blocks at b_min = 2" DIR ${WORK} ABSENT ${P}
  ARGS --q ${D}/q.npy --k ${D}/k.npy --rope half --avg-bits 1.9999995 --b-min 2 -o ${P} --quiet)
# bad usage: avg-bits not finite or above 8, width outside 0..8 (rows 6, 8)
# a path glued to -o: named, with the spelling that works
foreach(glued "-o${P}" "-o=${P}")
  expect_failure(CMD calibrate RC 2 MATCH "missing required option -o \\('-o=?[^']*plan.bin' was given: write -o and its value as two arguments, -o [^=]*plan.bin\\)"
    DIR ${WORK} ABSENT ${P} ARGS --q ${D}/q.npy --k ${D}/k.npy --rope half --avg-bits 3 ${glued})
endforeach()
# an option given twice with two values: named, nothing written (the same value twice is fine)
expect_failure(CMD calibrate RC 2 MATCH "option --q given twice, as '[^']*q.npy' and '[^']*k.npy'" DIR ${WORK} ABSENT ${P}
  ARGS --q ${D}/q.npy --q ${D}/k.npy --k ${D}/k.npy --rope half --avg-bits 3 -o ${P})
expect_failure(CMD calibrate RC 2 MATCH "option --avg-bits given twice, as '3' and '4'" DIR ${WORK} ABSENT ${P}
  ARGS --q ${D}/q.npy --k ${D}/k.npy --rope half --avg-bits 3 --avg-bits=4 -o ${P})
expect_success(CMD calibrate ARGS --q ${D}/q.npy --q ${D}/q.npy --k ${D}/k.npy --rope half --avg-bits 3 -o ${WORK}/twice.bin --quiet)
# a pipe as an input (`<(zcat q.npy.gz)`, /dev/stdin): read whole, the same plan as from the file
execute_process(COMMAND sh -c "cat '${D}/q.npy' | '${BGTQ}' calibrate --q /dev/stdin --k '${D}/k.npy' --rope half --avg-bits 3 -o '${WORK}/piped.bin' --quiet"
  RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "calibrate --q /dev/stdin from a pipe: exit ${rc}: ${err}")
endif()
file(SHA256 ${WORK}/ok.bin from_file)
file(SHA256 ${WORK}/piped.bin from_pipe)
if(NOT from_file STREQUAL from_pipe)
  message(FATAL_ERROR "calibrate: the plan from a piped --q differs from the plan from the file")
endif()
expect_failure(CMD calibrate RC 2 MATCH "^bgtq calibrate: --avg-bits: 'nan' is not finite$" DIR ${WORK} ABSENT ${P}
  ARGS --q ${D}/q.npy --k ${D}/k.npy --rope half --avg-bits nan -o ${P})
expect_failure(CMD calibrate RC 2 MATCH "--avg-bits 8.5 is out of range \\[0, 8\\]" DIR ${WORK} ABSENT ${P}
  ARGS --q ${D}/q.npy --k ${D}/k.npy --rope half --avg-bits 8.5 -o ${P})
expect_failure(CMD calibrate RC 2 MATCH "--b-max 9 is out of range" DIR ${WORK} ABSENT ${P}
  ARGS --q ${D}/q.npy --k ${D}/k.npy --rope half --avg-bits 3 --b-max 9 -o ${P})
# a failing run leaves an existing plan untouched
file(COPY_FILE ${WORK}/ok.bin ${P})
file(SHA256 ${P} before)
expect_failure(CMD calibrate RC 1 CATEGORY shape_mismatch DIR ${WORK}
  ARGS --q ${D}/q.npy --k ${D}/k_d6.npy --rope half --avg-bits 3 -o ${P} --quiet)
file(SHA256 ${P} after)
if(NOT before STREQUAL after)
  message(FATAL_ERROR "a failing calibrate changed the existing plan")
endif()
# an output path that cannot be written (a regular file in the way)
file(WRITE ${WORK}/blocker "x")
expect_failure(CMD calibrate RC 1 CATEGORY io_error MATCH "-o '[^']*/blocker/plan\\.bin': '[^']*/blocker' is not a directory$" DIR ${WORK} ABSENT ${WORK}/blocker/plan.bin
  ARGS --q ${D}/q.npy --k ${D}/k.npy --rope half --avg-bits 3 -o ${WORK}/blocker/plan.bin --quiet)
# above b_max (row 9): capped with one warning line, exit 0, plan written
expect_success(CMD calibrate ARGS --q ${D}/q.npy --k ${D}/k.npy --rope half --avg-bits 6 --b-max 4 -o ${WORK}/capped.bin --quiet)
if(NOT LAST_STDERR MATCHES "^bgtq calibrate: warning: .*bit budget B = 24 exceeds L \\* b_max = 4 \\* 4 = 16; capped to 16")
  message(FATAL_ERROR "calibrate: cap warning missing: ${LAST_STDERR}")
endif()
if(NOT EXISTS ${WORK}/capped.bin)
  message(FATAL_ERROR "calibrate: no plan after a capped budget")
endif()
# an output directory that does not exist: refused before any work, for -o and for
# --json-out; with --json-out failing, the plan (-o) is not written either (both or none)
expect_failure(CMD calibrate RC 1 CATEGORY io_error MATCH "-o '.*nodir/p.bin': the directory '.*nodir' does not exist"
  DIR ${WORK} ABSENT ${WORK}/nodir ARGS --q ${D}/q.npy --k ${D}/k.npy --rope half --avg-bits 3 -o ${WORK}/nodir/p.bin --quiet)
file(SHA256 ${P} before)
expect_failure(CMD calibrate RC 1 CATEGORY io_error MATCH "--json-out '.*nodir/p.json': the directory"
  DIR ${WORK} ARGS --q ${D}/q.npy --k ${D}/k.npy --rope half --avg-bits 3 -o ${P} --json-out ${WORK}/nodir/p.json --quiet)
file(SHA256 ${P} after)
if(NOT before STREQUAL after)
  message(FATAL_ERROR "calibrate replaced the plan although its --json-out could not be written")
endif()
expect_success(CMD calibrate ARGS --q ${D}/q.npy --k ${D}/k.npy --rope half --avg-bits 3 -o ${WORK}/two.bin
  --json-out ${WORK}/two.json --quiet)
if(NOT EXISTS ${WORK}/two.bin OR NOT EXISTS ${WORK}/two.json)
  message(FATAL_ERROR "calibrate -o --json-out: both files must be written")
endif()
