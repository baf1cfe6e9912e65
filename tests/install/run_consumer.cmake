# Step 1: install the library (headers, package config and, when the build has the
# kernels, the static library blockgtq_cuda) into PREFIX.
# Arguments: SOURCE_DIR BINARY_DIR PREFIX CONSUMER_SRC CONSUMER_BUILD CXX WITH_CUDA
file(REMOVE_RECURSE ${PREFIX} ${CONSUMER_BUILD} ${CONSUMER_BUILD}-nocuda)
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BINARY_DIR} --prefix ${PREFIX}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "install failed (${rc})")
endif()
# Step 2: configure, build and run a consumer against the installed copy only (with the
# kernels: find_package(blockgtq COMPONENTS cuda) and a program linking blockgtq_cuda).
execute_process(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER_SRC} -B ${CONSUMER_BUILD}
  -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_BUILD_TYPE=Release
  -DEXPECT_CUDA=${WITH_CUDA}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer configure failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${CONSUMER_BUILD} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer build failed (${rc})")
endif()
set(programs consumer)
if(WITH_CUDA)
  list(APPEND programs consumer_cuda)
endif()
foreach(p IN LISTS programs)
  execute_process(COMMAND ${CONSUMER_BUILD}/${p} RESULT_VARIABLE rc OUTPUT_VARIABLE out)
  message(STATUS "${p} said: ${out}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${p} run failed (${rc})")
  endif()
endforeach()
# Step 3 (with the kernels): the package config still loads where the CUDA toolkit is not
# found, without blockgtq::blockgtq_cuda (configure only).
if(WITH_CUDA)
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER_SRC} -B ${CONSUMER_BUILD}-nocuda
    -DCMAKE_PREFIX_PATH=${PREFIX} -DCMAKE_CXX_COMPILER=${CXX} -DEXPECT_CUDA=OFF
    -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON
    RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer configure without the CUDA toolkit failed (${rc})")
  endif()
endif()
