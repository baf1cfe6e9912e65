# A SIGTERM that arrives between two renames of a multi-output write (bgtq synth's
# q/k/v.npy) takes effect after the last one: every output is new, none is left old
# (docs/errors.md, section 1: all or nothing, also when the run is killed). PRELOAD is
# the shim tests/cli/preload/rename_signal.cpp, which raises SIGTERM right after the
# process's first rename. Needs a shell for the signal's exit status.
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)
find_program(SH sh)
if(NOT SH)
  message("SKIPPED: needs sh")
  return()
endif()
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/out)
foreach(f q k v)
  file(WRITE ${WORK}/out/${f}.npy "OLD${f}")
endforeach()
execute_process(COMMAND ${SH} -c "LD_PRELOAD='${PRELOAD}' '${BGTQ}' synth --layers 1 --tokens 4 --q-heads 2 --kv-heads 1 --dim 8 --rope half -o '${WORK}/out'; echo \"rc=$?\""
                OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
bgtq_expect_match("${out}" "rc=143" "bgtq synth with SIGTERM after its first rename (exit status of SIGTERM)")
foreach(f q k v)
  file(READ ${WORK}/out/${f}.npy head LIMIT 6 HEX)
  if(NOT head STREQUAL "934e554d5059")
    file(READ ${WORK}/out/${f}.npy old LIMIT 8)
    message(FATAL_ERROR "${f}.npy is not the new .npy (starts '${old}'): a signal between the renames left old and new outputs mixed; stderr: ${err}")
  endif()
endforeach()
file(GLOB left ${WORK}/out/*.tmp.*)
if(left)
  message(FATAL_ERROR "temporaries left behind: ${left}")
endif()
