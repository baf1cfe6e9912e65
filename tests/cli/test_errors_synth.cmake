# Bad-input contract of `bgtq synth` (docs/errors.md, CLI rows): no partial output file,
# no temporary left behind, one clear line, exit 1 or 2.
include(${CMAKE_CURRENT_LIST_DIR}/../errors/cli_helpers.cmake)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(G --layers 1 --tokens 9 --q-heads 2 --kv-heads 1 --dim 8 --rope half --quiet)

expect_success(CMD synth ARGS ${G} -o ${WORK}/ok)
# output directory blocked by a regular file
file(WRITE ${WORK}/blocker "x")
expect_failure(CMD synth RC 1 CATEGORY io_error MATCH "-o '[^']*/blocker/out': '[^']*/blocker' exists and is not a directory$" DIR ${WORK} ABSENT ${WORK}/blocker/out ARGS ${G} -o ${WORK}/blocker/out)
# v.npy cannot be replaced: the three files are all-or-nothing, so q.npy and k.npy are
# not written either, and no *.tmp.* remains
file(MAKE_DIRECTORY ${WORK}/out2/v.npy)
expect_failure(CMD synth RC 1 CATEGORY io_error MATCH "\\(v\\.npy\\) '[^']*/out2/v\\.npy' is a directory$" DIR ${WORK}/out2 ABSENT ${WORK}/out2/q.npy ${WORK}/out2/k.npy
  ARGS ${G} -o ${WORK}/out2)
# an existing output is replaced only by a complete file: a failing run leaves it intact
file(MAKE_DIRECTORY ${WORK}/out3)
file(WRITE ${WORK}/out3/q.npy "old")
expect_failure(CMD synth RC 2 MATCH "--dim must be even" DIR ${WORK}/out3
  ARGS --layers 1 --tokens 9 --q-heads 2 --kv-heads 1 --dim 7 --rope half -o ${WORK}/out3)
file(READ ${WORK}/out3/q.npy kept)
if(NOT kept STREQUAL "old")
  message(FATAL_ERROR "a failing synth changed an existing q.npy")
endif()
# bad usage: exit 2, nothing created
expect_failure(CMD synth RC 2 MATCH "^bgtq synth: --kv-heads 0 is out of range \\[1, [0-9]+\\]$" DIR ${WORK} ABSENT ${WORK}/out4
  ARGS --layers 1 --tokens 9 --q-heads 2 --kv-heads 0 --dim 8 --rope half -o ${WORK}/out4)
# beyond what a plan holds (calibrate and eval would refuse the files): 4097 layers, 4097 KV heads
expect_failure(CMD synth RC 2 MATCH "^bgtq synth: --layers 4097 is out of range \\[1, 4096\\]$" DIR ${WORK} ABSENT ${WORK}/out4
  ARGS --layers 4097 --tokens 9 --q-heads 2 --kv-heads 1 --dim 8 --rope half -o ${WORK}/out4)
expect_failure(CMD synth RC 2 MATCH "^bgtq synth: --kv-heads 4097 is out of range \\[1, 4096\\]$" DIR ${WORK} ABSENT ${WORK}/out4
  ARGS --layers 1 --tokens 9 --q-heads 4097 --kv-heads 4097 --dim 8 --rope half -o ${WORK}/out4)
expect_failure(CMD synth RC 2 MATCH "^bgtq synth: --rope: unknown RoPE pairing 'sideways'" DIR ${WORK} ABSENT ${WORK}/out5
  ARGS --layers 1 --tokens 9 --q-heads 2 --kv-heads 1 --dim 8 --rope sideways -o ${WORK}/out5)

# every output is checked before the work (docs/errors.md row 21), without --quiet so that
# a "[synth] generating" line before the error would fail expect_failure's one-line rule:
set(GV --layers 1 --tokens 9 --q-heads 2 --kv-heads 1 --dim 8 --rope half)
# q.npy a symlink to k.npy: two outputs naming one file, bad usage (exit 2), nothing written
file(MAKE_DIRECTORY ${WORK}/same)
file(CREATE_LINK k.npy ${WORK}/same/q.npy SYMBOLIC)
expect_failure(CMD synth RC 2 MATCH "name the same file" DIR ${WORK}/same ABSENT ${WORK}/same/k.npy ${WORK}/same/v.npy
  ARGS ${GV} -o ${WORK}/same)
# a directory in the way of v.npy
file(MAKE_DIRECTORY ${WORK}/vdir/v.npy)
expect_failure(CMD synth RC 1 CATEGORY io_error MATCH "\\(v.npy\\) '[^']*v.npy' is a directory" DIR ${WORK}/vdir
  ABSENT ${WORK}/vdir/q.npy ARGS ${GV} -o ${WORK}/vdir)
# q.npy a dangling symlink into a missing directory
file(MAKE_DIRECTORY ${WORK}/dangling)
file(CREATE_LINK ${WORK}/no_such_dir/q.npy ${WORK}/dangling/q.npy SYMBOLIC)
expect_failure(CMD synth RC 1 CATEGORY io_error MATCH "no_such_dir' does not exist" DIR ${WORK}/dangling
  ABSENT ${WORK}/dangling/k.npy ARGS ${GV} -o ${WORK}/dangling)

# --rope-base: the message and the range agree (1 itself is refused)
expect_failure(CMD synth RC 2 MATCH "--rope-base 1 is out of range .1, 1e.12.: RoPE needs a base > 1" DIR ${WORK} ABSENT ${WORK}/rb
  ARGS ${G} --rope-base 1 -o ${WORK}/rb)
# outlier blocks are capped at D/8: documented in --help, and given values above the cap warn
execute_process(COMMAND ${BGTQ} synth --help OUTPUT_VARIABLE help)
if(NOT help MATCHES "capped at D/8")
  message(FATAL_ERROR "synth --help does not state the outlier cap:\n${help}")
endif()
expect_success(CMD synth ARGS ${G} --outliers-min 4 --outliers-max 4 -o ${WORK}/o4)
if(NOT LAST_STDERR MATCHES "^bgtq synth: warning: --outliers-min/--outliers-max 4..4: at most 1 outlier block\\(s\\) per KV head at --dim 8")
  message(FATAL_ERROR "synth --outliers-max 4 at D = 8: no warning naming the cap (shown under --quiet too):\n${LAST_STDERR}")
endif()
expect_success(CMD synth ARGS ${G} -o ${WORK}/o_default)
if(NOT LAST_STDERR STREQUAL "")
  message(FATAL_ERROR "synth with the default outliers at D = 8 warned:\n${LAST_STDERR}")
endif()
