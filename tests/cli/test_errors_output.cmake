# Output contract shared by the commands (docs/errors.md, row 21): a result that cannot be
# written is an error, never an exit 0 -- standard output on a full device (a full disk
# under `--json > file`), two output options naming one file, an empty output path, an
# output naming an input -- and nothing is left behind; symlinks and devices as outputs.
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/../errors/cli_helpers.cmake)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(D ${ERRORS_DATA})

# stdout that cannot take the result: exit 1 with io_error (/dev/full: every write fails)
if(NOT EXISTS /dev/full)
  message(FATAL_ERROR "this test needs /dev/full (Linux)")
endif()
foreach(cmd "codebook;--bits;2;--dim;4;--json"
            "codebook;--bits;2;--dim;4"
            "eval;--q;${D}/q.npy;--k;${D}/k.npy;--rope;half;--bits;2;--methods;fp16,tq;--quiet;--json")
  execute_process(COMMAND ${BGTQ} ${cmd} OUTPUT_FILE /dev/full ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 1 OR NOT err MATCHES "error \\(io_error\\): writing the result to standard output failed")
    message(FATAL_ERROR "bgtq ${cmd} > /dev/full: exit ${rc}, expected 1 with an io_error; stderr: ${err}")
  endif()
endforeach()

# stdout closed by its reader (a pipe into a command that exits at once): exit 1 with the
# same io_error, not a silent death by SIGPIPE (status 141 under a shell). The result is
# far larger than a pipe's or a socket pair's buffer (about 1 MB of JSON for 500000
# blocks), so the write cannot land before the reader is gone.
string(REPEAT "1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25\n" 20000 scores)
file(WRITE ${WORK}/many_scores.txt "${scores}")
execute_process(COMMAND ${BGTQ} allocate --scores ${WORK}/many_scores.txt --avg-bits 2 --json
                COMMAND ${CMAKE_COMMAND} -E true
                ERROR_VARIABLE err RESULTS_VARIABLE rcs)
list(GET rcs 0 rc)
if(NOT rc EQUAL 1 OR NOT err MATCHES "error \\(io_error\\): writing the result to standard output failed")
  message(FATAL_ERROR "bgtq allocate --json | (a reader that exits): exit ${rc}, expected 1 with an io_error; stderr: ${err}")
endif()

# -o and --json-out naming one file (also through ./ and ..): refused before any work,
# nothing written
file(MAKE_DIRECTORY ${WORK}/sub)
foreach(twin "${WORK}/p.bin" "${WORK}/./p.bin" "${WORK}/sub/../p.bin" "p.bin" "./p.bin" "sub/../p.bin")
  expect_failure(CMD calibrate RC 2 MATCH "-o and --json-out name the same file" DIR ${WORK} ABSENT ${WORK}/p.bin
    CWD ${WORK} ARGS --q ${D}/q.npy --k ${D}/k.npy --rope half --avg-bits 3 -o ${WORK}/p.bin --json-out ${twin} --quiet)
endforeach()
# relative spellings on both sides, run from ${WORK} (a bare "p.bin" not written yet was
# compared unequal to "./p.bin": the JSON replaced the plan, exit 0)
foreach(twin "./p.bin" "sub/../p.bin")
  expect_failure(CMD calibrate RC 2 MATCH "-o and --json-out name the same file" DIR ${WORK} ABSENT ${WORK}/p.bin
    CWD ${WORK} ARGS --q ${D}/q.npy --k ${D}/k.npy --rope half --avg-bits 3 -o p.bin --json-out ${twin} --quiet)
endforeach()

# an empty output path: a usage error before any work (eval would otherwise run to the end
# and fail on the rename); with --json-out empty, the plan is not written either
# (execute_process directly: expect_failure's argument list would drop the empty string)
execute_process(COMMAND ${BGTQ} eval --q ${D}/q.npy --k ${D}/k.npy --rope half --bits 2 --methods tq -o "" --quiet
                ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 2 OR NOT err MATCHES "^bgtq eval: -o: the output path is empty")
  message(FATAL_ERROR "eval -o '': exit ${rc}, expected 2 with 'the output path is empty'; stderr: ${err}")
endif()
execute_process(COMMAND ${BGTQ} calibrate --q ${D}/q.npy --k ${D}/k.npy --rope half --avg-bits 3 -o ${WORK}/p.bin --json-out ""
                        --quiet ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 2 OR NOT err MATCHES "^bgtq calibrate: --json-out: the output path is empty" OR EXISTS ${WORK}/p.bin)
  message(FATAL_ERROR "calibrate --json-out '': exit ${rc}, expected 2 and no plan written; stderr: ${err}")
endif()
# '-' is not standard output here (it would be a file named '-'): refused, nothing written
foreach(cmd eval calibrate)
  set(args --q ${D}/q.npy --k ${D}/k.npy --rope half --bits 2 --methods tq)
  if(cmd STREQUAL "calibrate")
    set(args --q ${D}/q.npy --k ${D}/k.npy --rope half --avg-bits 3)
  endif()
  execute_process(COMMAND ${BGTQ} ${cmd} ${args} -o - --quiet WORKING_DIRECTORY ${WORK} ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "^bgtq ${cmd}: -o -: standard output is not an output path here" OR EXISTS ${WORK}/-)
    message(FATAL_ERROR "${cmd} -o -: exit ${rc}, expected 2 and no file '-'; stderr: ${err}")
  endif()
endforeach()

# an output naming an input (also through a symlink): refused, the input left as it was
file(COPY ${D}/k.npy DESTINATION ${WORK})
file(SHA256 ${WORK}/k.npy k_sum)
file(CREATE_LINK ${WORK}/k.npy ${WORK}/k_link.npy SYMBOLIC)
foreach(o "${WORK}/k.npy" "${WORK}/k_link.npy")
  expect_failure(CMD calibrate RC 2 MATCH "is the input --k" DIR ${WORK}
    ARGS --q ${D}/q.npy --k ${WORK}/k.npy --rope half --avg-bits 3 -o ${o} --quiet)
endforeach()
file(SHA256 ${WORK}/k.npy k_sum2)
if(NOT k_sum STREQUAL k_sum2)
  message(FATAL_ERROR "the input k.npy changed after the refused calibrate")
endif()

# a symlink as the output: the file it names gets the plan, the link stays a link
file(WRITE ${WORK}/target.bin "old")
file(CREATE_LINK ${WORK}/target.bin ${WORK}/plan_link.bin SYMBOLIC)
expect_success(CMD calibrate ARGS --q ${D}/q.npy --k ${D}/k.npy --rope half --avg-bits 3 -o ${WORK}/plan_link.bin --quiet)
if(NOT IS_SYMLINK ${WORK}/plan_link.bin)
  message(FATAL_ERROR "calibrate -o through a symlink replaced the link itself")
endif()
file(SIZE ${WORK}/target.bin target_size)
if(target_size LESS 100)
  message(FATAL_ERROR "calibrate -o through a symlink: the linked file has ${target_size} bytes, not a plan")
endif()
# a symlink to a file not there yet: the file is created, the link stays a link
file(CREATE_LINK ${WORK}/new_target.bin ${WORK}/dangling.bin SYMBOLIC)
expect_success(CMD calibrate ARGS --q ${D}/q.npy --k ${D}/k.npy --rope half --avg-bits 3 -o ${WORK}/dangling.bin --quiet)
if(NOT IS_SYMLINK ${WORK}/dangling.bin OR NOT EXISTS ${WORK}/new_target.bin)
  message(FATAL_ERROR "calibrate -o through a dangling symlink replaced the link instead of creating the file it names")
endif()
# ... and one into a directory that does not exist: refused before any work
file(CREATE_LINK ${WORK}/no_such_dir/p.bin ${WORK}/dangling2.bin SYMBOLIC)
expect_failure(CMD calibrate RC 1 CATEGORY io_error MATCH "the directory '[^']*no_such_dir' does not exist"
  ARGS --q ${D}/q.npy --k ${D}/k.npy --rope half --avg-bits 3 -o ${WORK}/dangling2.bin --quiet)
if(NOT IS_SYMLINK ${WORK}/dangling2.bin)
  message(FATAL_ERROR "a refused calibrate replaced the symlink dangling2.bin")
endif()
# synth and capture: an empty output directory is bad usage, as for the other commands
execute_process(COMMAND ${BGTQ} synth --layers 1 --tokens 4 --q-heads 2 --kv-heads 1 --dim 8 --rope half -o "" --quiet
                ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 2 OR NOT err MATCHES "^bgtq synth: -o: the output directory is empty")
  message(FATAL_ERROR "synth -o '': exit ${rc}, expected 2 with 'the output directory is empty'; stderr: ${err}")
endif()
execute_process(COMMAND ${BGTQ} capture --model m.bin --tokenizer t.bin --text x.txt -o "" --quiet
                ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 2 OR NOT err MATCHES "^bgtq capture: -o: the output directory is empty")
  message(FATAL_ERROR "capture -o '': exit ${rc}, expected 2 with 'the output directory is empty'; stderr: ${err}")
endif()
# a regular file where the output's directory should be: named as such
file(WRITE ${WORK}/afile "x")
expect_failure(CMD calibrate RC 1 CATEGORY io_error MATCH "'[^']*afile' is not a directory"
  ARGS --q ${D}/q.npy --k ${D}/k.npy --rope half --avg-bits 3 -o ${WORK}/afile/p.bin --quiet)

# an fp16 baseline of keys beyond fp16's range (k_big.npy: one element 1e5) is stored as
# the fp16 cache stores it, clamped to 65504 (row 19): finite metrics, not null
bgtq_run(out err rc eval --q ${D}/q.npy --k ${D}/k_big.npy --v ${D}/v.npy --rope half --bits 2 --methods fp16 --quiet --json)
bgtq_expect_rc("${rc}" 0 "eval --methods fp16 on k_big.npy" "${err}")
foreach(m logit_mae kl out_rel_l2)
  string(JSON x GET "${out}" summary mean fp16 ${m})
  if(x STREQUAL "null" OR NOT x GREATER_EQUAL 0)
    message(FATAL_ERROR "eval fp16 on k_big.npy: ${m} = ${x}: ${out}")
  endif()
endforeach()
# and the clamps are said, once per method (warnings show with --quiet too): the fp16
# baseline's one component, TQ-MSE's one clamped key radius (its 8 coordinates are one
# group); nothing for the values, which are in range
bgtq_run(out err rc eval --q ${D}/q.npy --k ${D}/k_big.npy --v ${D}/v.npy --rope half --bits 2 --methods fp16,tq --quiet)
bgtq_expect_rc("${rc}" 0 "eval --methods fp16,tq on k_big.npy" "${err}")
if(NOT err MATCHES "bgtq eval: warning: fp16: 1 key and 0 value components beyond \\+-65504 were clamped to it [^\n]*, first at layer index 0"
   OR NOT err MATCHES "bgtq eval: warning: tq@2: 1 key and 0 value radii above 65504 were clamped to it \\(fp16 radii")
  message(FATAL_ERROR "eval on k_big.npy: the clamps are not said: ${err}")
endif()
# each method's clamps are counted over the rows its cache stores that way, with their
# cause: KIVI quantizes from the fp16 window's rows (clamped components; it said nothing);
# a --sink or --recent window holding token 2 clamps its components and TQ-MSE /
# Block-GTQ never encode it (they said a radius was clamped, also with every key in the
# sink); a sink before it leaves token 2 encoded from the input (a clamped radius only).
# A case: methods; window; those saying a clamped component; its cause; those saying a
# clamped radius ("-": none).
foreach(case "kivi,kivi-sym;-;kivi@2 kivi-sym@2;KIVI holds every token in the fp16 window;-"
             "tq,bgtq;--sink 3;tq@2 bgtq@2;the fp16 --sink window saturates there;-"
             "tq;--sink 40;tq@2;the fp16 --sink window saturates there;-"
             "tq;--recent 7;tq@2;the fp16 --sink / --recent window saturates there, and tokens are encoded from its rows;-"
             "tq;--sink 2;-;-;tq@2")
  list(GET case 0 methods)
  list(GET case 1 window)
  list(GET case 2 held)
  list(GET case 3 cause)
  list(GET case 4 encoded)
  foreach(v window held cause encoded)
    if(${v} STREQUAL "-")
      set(${v} "")
    endif()
  endforeach()
  set(run "eval --methods ${methods} ${window} on k_big.npy")
  separate_arguments(window)
  separate_arguments(held)
  bgtq_run(out err rc eval --q ${D}/q.npy --k ${D}/k_big.npy --v ${D}/v.npy --rope half --bits 2 --methods ${methods} ${window} --quiet)
  bgtq_expect_rc("${rc}" 0 "${run}" "${err}")
  foreach(m IN LISTS held)
    string(REPLACE "+" "\\+" ce "${cause}")
    if(NOT err MATCHES "bgtq eval: warning: ${m}: 1 key and 0 value components beyond \\+-65504 were clamped to it \\(${ce}[^\n]*row 19\\), first at layer index 0")
      message(FATAL_ERROR "${run}: ${m}'s clamped component is not said (${cause}): ${err}")
    endif()
  endforeach()
  foreach(m IN LISTS encoded)
    if(NOT err MATCHES "bgtq eval: warning: ${m}: 1 key and 0 value radii above 65504 were clamped to it \\(fp16 radii")
      message(FATAL_ERROR "${run}: ${m}'s clamped radius is not said: ${err}")
    endif()
  endforeach()
  string(REGEX MATCHALL "clamped" lines "${err}")
  list(LENGTH held n_held)
  list(LENGTH encoded n_encoded)
  list(LENGTH lines n)
  math(EXPR want "${n_held} + ${n_encoded}")
  if(NOT n EQUAL want)
    message(FATAL_ERROR "${run}: ${n} clamp warnings, expected ${want}: ${err}")
  endif()
endforeach()
bgtq_run(out err rc eval --q ${D}/q.npy --k ${D}/k.npy --v ${D}/v.npy --rope half --bits 2 --methods fp16,tq --quiet)
if(err MATCHES "clamped")
  message(FATAL_ERROR "eval on keys in fp16's range: a clamp warning: ${err}")
endif()
