# Bad-input contract of `bgtq capture` (docs/errors.md, CLI rows): every failure exits 1
# with one line naming the category and the file, and leaves no output behind.
include(${CMAKE_CURRENT_LIST_DIR}/../errors/cli_helpers.cmake)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
file(WRITE ${WORK}/text.txt "the cat sat on the mat\nthe end\n")
set(M ${ERRORS_DATA}/tiny.ckpt)
set(T ${ERRORS_DATA}/tiny.tok)

# sanity: the inputs are valid
expect_success(CMD capture ARGS --model ${M} --tokenizer ${T} --text ${WORK}/text.txt -o ${WORK}/ok --quiet)
foreach(f q k v)
  if(NOT EXISTS ${WORK}/ok/${f}.npy)
    message(FATAL_ERROR "sanity run wrote no ${f}.npy")
  endif()
endforeach()

# a missing model: io_error, no output directory created
expect_failure(CMD capture RC 1 CATEGORY io_error MATCH "cannot open checkpoint '[^']*/missing\\.bin'$" DIR ${WORK} ABSENT ${WORK}/out1
  ARGS --model ${WORK}/missing.bin --tokenizer ${T} --text ${WORK}/text.txt -o ${WORK}/out1 --quiet)
# a file that is not a checkpoint (a copy of the tokenizer given as the model, under its own
# name: with the same file for both, a message naming the tokenizer passed too)
file(COPY_FILE ${T} ${WORK}/tok_as_model.bin)
expect_failure(CMD capture RC 1 CATEGORY format_error MATCH "\\): [^ ]*/tok_as_model\\.bin: [a-z_]+ = -?[0-9]+ is outside the sane range"
  DIR ${WORK} ABSENT ${WORK}/out2 ARGS --model ${WORK}/tok_as_model.bin --tokenizer ${T} --text ${WORK}/text.txt -o ${WORK}/out2 --quiet)
# a truncated checkpoint: the message gives the expected and the actual size
expect_failure(CMD capture RC 1 CATEGORY format_error MATCH "tiny_truncated.ckpt.*expected 11324 bytes, actual 1000"
  DIR ${WORK} ABSENT ${WORK}/out3
  ARGS --model ${ERRORS_DATA}/tiny_truncated.ckpt --tokenizer ${T} --text ${WORK}/text.txt -o ${WORK}/out3 --quiet)
# a file that is not a tokenizer (a copy of the text, under its own name: with the text
# itself, a message naming --text passed too); the tokenizer's header field is named
file(COPY_FILE ${WORK}/text.txt ${WORK}/not_a_tok.txt)
expect_failure(CMD capture RC 1 CATEGORY format_error MATCH "\\): [^ ]*/not_a_tok\\.txt: max_token_length = [0-9]+ is outside"
  DIR ${WORK} ABSENT ${WORK}/out4 ARGS --model ${M} --tokenizer ${WORK}/not_a_tok.txt --text ${WORK}/text.txt -o ${WORK}/out4 --quiet)
# an output directory that cannot be created (a regular file is in the way)
file(WRITE ${WORK}/blocker "x")
expect_failure(CMD capture RC 1 CATEGORY io_error MATCH "-o '[^']*/blocker/out': '[^']*/blocker' exists and is not a directory$" DIR ${WORK} ABSENT ${WORK}/blocker/out
  ARGS --model ${M} --tokenizer ${T} --text ${WORK}/text.txt -o ${WORK}/blocker/out --quiet)
# an output file that cannot be replaced (k.npy is a directory): q.npy, k.npy and v.npy
# are all-or-nothing, so none is written, and no temporary remains
file(MAKE_DIRECTORY ${WORK}/out5/k.npy)
expect_failure(CMD capture RC 1 CATEGORY io_error MATCH "\\(k\\.npy\\) '[^']*/out5/k\\.npy' is a directory$" DIR ${WORK}/out5 ABSENT ${WORK}/out5/v.npy ${WORK}/out5/q.npy
  ARGS --model ${M} --tokenizer ${T} --text ${WORK}/text.txt -o ${WORK}/out5 --quiet)
# bad usage: exit 2 with the usage line, nothing written
expect_failure(CMD capture RC 2 MATCH "^bgtq capture: --tokens 0 is out of range" DIR ${WORK} ABSENT ${WORK}/out6
  ARGS --model ${M} --tokenizer ${T} --text ${WORK}/text.txt --tokens 0 -o ${WORK}/out6 --quiet)
expect_failure(CMD capture RC 2 MATCH "missing required option --model" DIR ${WORK} ABSENT ${WORK}/out7
  ARGS --tokenizer ${T} --text ${WORK}/text.txt -o ${WORK}/out7)

# ppl on the same tiny model: a --calib-docs above what the text holds, and a calibration
# that falls back to a scored document, are said (warnings), and the header names
# Block-GTQ's calibration only when a Block-GTQ cache runs
file(WRITE ${WORK}/docs3.txt "the cat sat on the mat\nhello there the dog\nthe end of the story here\n")
expect_success(CMD ppl ARGS --model ${M} --tokenizer ${T} --text ${WORK}/docs3.txt --kv fp32 --calib-docs 5 --quiet)
if(NOT LAST_STDERR MATCHES "^bgtq ppl: warning: --calib-docs 5: [^\n]*docs3.txt has 3 documents; the first 2 are held out")
  message(FATAL_ERROR "ppl --calib-docs 5 on 3 documents: no warning; stderr: ${LAST_STDERR}")
endif()
if(LAST_STDOUT MATCHES "Block-GTQ" OR NOT LAST_STDOUT MATCHES "perplexity over 1 documents [^\n]*, the first 2 held out\n")
  message(FATAL_ERROR "ppl --kv fp32: the header should name the held-out documents and no Block-GTQ calibration: ${LAST_STDOUT}")
endif()
# the default --calib-docs (2) is said to be the default when the text is short of it
file(WRITE ${WORK}/docs2.txt "the cat sat on the mat\nhello there the dog\n")
expect_success(CMD ppl ARGS --model ${M} --tokenizer ${T} --text ${WORK}/docs2.txt --kv fp32 --quiet)
if(NOT LAST_STDERR MATCHES "^bgtq ppl: warning: --calib-docs 2 \\(the default\\): [^\n]*docs2.txt has 2 documents; the first 1 are held out")
  message(FATAL_ERROR "ppl with the default --calib-docs on 2 documents: stderr ${LAST_STDERR}")
endif()
# --calib-text and --calib-docs are alternatives: both given is bad usage
expect_failure(CMD ppl RC 2 MATCH "--calib-text and --calib-docs are alternatives" DIR ${WORK}
  ARGS --model ${M} --tokenizer ${T} --text ${WORK}/docs3.txt --calib-text ${WORK}/docs2.txt --calib-docs 1 --quiet)
expect_success(CMD ppl ARGS --model ${M} --tokenizer ${T} --text ${WORK}/docs3.txt --kv fp32,bgtq3 --calib-docs 0 --quiet)
if(NOT LAST_STDERR MATCHES "Block-GTQ calibrates on the first document, which is also scored"
   OR NOT LAST_STDOUT MATCHES "Block-GTQ calibrated on [0-9]+ tokens of the first document")
  message(FATAL_ERROR "ppl --calib-docs 0: stderr ${LAST_STDERR} stdout ${LAST_STDOUT}")
endif()
# a --calib-text that no cache uses is said (ppl: no Block-GTQ cache in --kv; generate: a
# cache that does not calibrate), and not when one calibrates on it
set(unused "--calib-text [^ ]*docs2\\.txt is not used")
foreach(kv "fp32,tq3" "fp32,bgtq3" "fp32,k3v2")
  expect_success(CMD ppl ARGS --model ${M} --tokenizer ${T} --text ${WORK}/docs3.txt --kv ${kv} --calib-text ${WORK}/docs2.txt --quiet)
  if(kv STREQUAL "fp32,tq3" AND NOT LAST_STDERR MATCHES "^bgtq ppl: warning: ${unused}: no cache in --kv calibrates [^\n]*every document of [^ ]*docs3\\.txt is scored, as with it\n$")
    message(FATAL_ERROR "ppl --kv ${kv} --calib-text: no warning that it is unused: ${LAST_STDERR}")
  elseif(NOT kv STREQUAL "fp32,tq3" AND NOT LAST_STDERR STREQUAL "")
    message(FATAL_ERROR "ppl --kv ${kv} --calib-text: stderr ${LAST_STDERR}")
  endif()
endforeach()
foreach(kv tq3 kivi2 bgtq3)
  expect_success(CMD generate ARGS --model ${M} --tokenizer ${T} --prompt "the cat" --steps 3 --kv ${kv} --calib-text ${WORK}/docs2.txt --quiet)
  if(NOT kv STREQUAL "bgtq3" AND NOT LAST_STDERR MATCHES "^bgtq generate: warning: ${unused}: the cache ${kv} does not calibrate")
    message(FATAL_ERROR "generate --kv ${kv} --calib-text: no warning that it is unused: ${LAST_STDERR}")
  elseif(kv STREQUAL "bgtq3" AND NOT LAST_STDERR STREQUAL "")
    message(FATAL_ERROR "generate --kv ${kv} --calib-text: stderr ${LAST_STDERR}")
  endif()
endforeach()

# every output is checked before anything is read (docs/errors.md row 21): with a missing
# model, the output's problem is the one reported
file(MAKE_DIRECTORY ${WORK}/same)
file(CREATE_LINK k.npy ${WORK}/same/q.npy SYMBOLIC)
expect_failure(CMD capture RC 2 MATCH "name the same file" DIR ${WORK}/same ABSENT ${WORK}/same/k.npy
  ARGS --model ${WORK}/missing.bin --tokenizer ${T} --text ${WORK}/text.txt -o ${WORK}/same --quiet)
file(MAKE_DIRECTORY ${WORK}/vdir/v.npy)
expect_failure(CMD capture RC 1 CATEGORY io_error MATCH "\\(v.npy\\) '[^']*v.npy' is a directory" DIR ${WORK}/vdir
  ABSENT ${WORK}/vdir/q.npy ARGS --model ${WORK}/missing.bin --tokenizer ${T} --text ${WORK}/text.txt -o ${WORK}/vdir --quiet)
file(MAKE_DIRECTORY ${WORK}/dangling)
file(CREATE_LINK ${WORK}/no_such_dir/k.npy ${WORK}/dangling/k.npy SYMBOLIC)
expect_failure(CMD capture RC 1 CATEGORY io_error MATCH "no_such_dir' does not exist" DIR ${WORK}/dangling
  ABSENT ${WORK}/dangling/q.npy ARGS --model ${WORK}/missing.bin --tokenizer ${T} --text ${WORK}/text.txt -o ${WORK}/dangling --quiet)
# an output naming an input: the text as q.npy
file(MAKE_DIRECTORY ${WORK}/in)
file(WRITE ${WORK}/in/q.npy "the cat sat on the mat\n")
expect_failure(CMD capture RC 2 MATCH "is the input --text" DIR ${WORK}/in
  ARGS --model ${M} --tokenizer ${T} --text ${WORK}/in/q.npy -o ${WORK}/in --quiet)

# a text shorter than --tokens: a warning, shown under --quiet too (docs/errors.md section 1)
file(WRITE ${WORK}/short.txt "hi\n")
expect_success(CMD capture ARGS --model ${M} --tokenizer ${T} --text ${WORK}/short.txt --tokens 30 -o ${WORK}/short --quiet)
if(NOT LAST_STDERR MATCHES "^bgtq capture: warning: the text gives only [0-9]+ tokens \\(asked for --tokens 30\\)")
  message(FATAL_ERROR "capture --quiet with a short text: no warning:\n${LAST_STDERR}")
endif()
