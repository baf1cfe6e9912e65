# bench/gpu/sdpa.py (the device script's table) on a fixture of bench_decode JSON, with
# a stand-in PyTorch (faketorch/: exact fake timings, cuDNN refusing the shape), so the
# ratios, the backend choice and the error paths are checked without a GPU.
# Receives PYTHON, SRC (the source tree) and WORK.
set(here ${SRC}/tests/cuda/sdpa)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
function(run_sdpa out_var err_var rc_var)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env PYTHONPATH=${here}/faketorch PYTHONDONTWRITEBYTECODE=1 ${ARGN}
    ${PYTHON} ${SRC}/bench/gpu/sdpa.py --packed ${here}/packed_sample.json --out ${WORK} --runs 20
    OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  set(${out_var} "${out}" PARENT_SCOPE)
  set(${err_var} "${err}" PARENT_SCOPE)
  set(${rc_var} "${rc}" PARENT_SCOPE)
endfunction()
function(expect text regex what)
  if(NOT text MATCHES "${regex}")
    message(FATAL_ERROR "${what}: output does not match '${regex}':\n${text}")
  endif()
endfunction()

# 1. default dispatch 100 us, flash 80, efficient 40 (the best), cuDNN refuses. T = 256, B = 1:
#    fp16 bytes 1064960, floor 0.26624 us at 4e12 B/s; Block-GTQ K3V3 10 us, its /tc row 5 us.
run_sdpa(out err rc FAKE_TORCH_LOG=${WORK}/calls.txt)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "sdpa.py exit ${rc}: ${err}")
endif()
# 2 shapes x 3 backends that run (default, flash, efficient) x (3 warm-ups + 20 timed): an
# L2 flush before each of the 120 timed calls (cuDNN refuses before anything is timed)
file(READ ${WORK}/calls.txt calls)
if(NOT calls MATCHES "^138 120")
  message(FATAL_ERROR "sdpa.py made '${calls}' (calls, L2 flushes); want 138 calls and 120 flushes")
endif()
expect("${out}" "fp16 SDPA +fp16 +1 +256 +100\\.0 +1064960 +0\\.003 +1\\.00 +0\\.40 +0\\.00" "default row")
expect("${out}" "fp16 efficient +fp16 +1 +256 +40\\.0 +1064960 +0\\.007 +2\\.50 +1\\.00 +0\\.01" "best-backend row")
expect("${out}" "Block-GTQ +K3V3 +1 +256 +10\\.0 +283136 +0\\.007 +10\\.00 +4\\.00 +0\\.03" "packed row")
expect("${out}" "Block-GTQ/tc +K3V3 +1 +256 +5\\.0 +283136 +0\\.014 +20\\.00 +8\\.00 +0\\.05" "tensor-core row")
expect("${out}" "fp16 SDPA +fp16 +1 +1024 +100\\.0" "second shape")
expect("${err}" "backend cudnn not used \\(No available kernel" "refused backend reported")
file(READ ${WORK}/gpu_decode.json js)
string(JSON best GET "${js}" rows 0 best)
string(JSON flash GET "${js}" rows 0 backends_us flash)
string(JSON xbest GET "${js}" rows 1 speedup_vs_best_fp16)
if(NOT best STREQUAL "efficient" OR NOT flash EQUAL 80 OR NOT xbest EQUAL 4)
  message(FATAL_ERROR "gpu_decode.json: best '${best}', flash ${flash} us, x_best ${xbest} (want efficient, 80, 4)")
endif()

# 2. a backend whose output disagrees with the default: that shape's fp16 baseline is dropped, loudly
run_sdpa(out err rc FAKE_TORCH_WRONG=FLASH_ATTENTION)
expect("${err}" "SDPA backend flash disagrees with the default dispatch" "disagreeing backend")
expect("${out}" "Block-GTQ +K3V3 +1 +256 +10\\.0 +283136 +0\\.007 +n/a +n/a +n/a" "rows without a baseline")

# 3. not a bench_decode JSON: a clear message and exit 2
execute_process(COMMAND ${PYTHON} ${SRC}/bench/gpu/sdpa.py --packed ${here}/test_sdpa_table.cmake
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 2)
  message(FATAL_ERROR "sdpa.py on a non-JSON file: exit ${rc}, want 2; stderr: ${err}")
endif()
expect("${err}" "not a bench_decode --json file" "bad input message")
