# Compiles one translation unit that includes every public header under include/bgtq with
# the warnings a consumer may turn on (-Wall -Wextra -Werror, -Wunused-parameter among
# them): the project's own programs build with -Wno-unused-parameter, a consumer may not.
# One TU for all headers keeps it cheap (about 10 s of CPU; one per header would take
# minutes); it checks warnings, not that each header includes what it uses.
# Arguments: -DCXX=... -DINCLUDE_DIR=<repo>/include -DEIGEN_DIRS=<list> -DFLAGS=<list> -DWORK=<dir>
file(GLOB_RECURSE headers RELATIVE ${INCLUDE_DIR} ${INCLUDE_DIR}/bgtq/*.hpp)
list(SORT headers)
set(tu "")
foreach(h IN LISTS headers)
  string(APPEND tu "#include <${h}>\n")
endforeach()
file(MAKE_DIRECTORY ${WORK})
file(WRITE ${WORK}/all_headers.cpp "${tu}")
set(isystem "")
foreach(d IN LISTS EIGEN_DIRS)
  list(APPEND isystem -isystem ${d})
endforeach()
execute_process(COMMAND ${CXX} -std=c++20 ${FLAGS} -Wall -Wextra -Wunused-parameter -Werror -fsyntax-only
    -I ${INCLUDE_DIR} ${isystem} ${WORK}/all_headers.cpp
  RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_VARIABLE out)
list(LENGTH headers n)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "a public header warns (${n} headers, flags: ${FLAGS}):\n${out}${err}")
endif()
message(STATUS "${n} public headers compile with -Wall -Wextra -Werror (flags: ${FLAGS})")
