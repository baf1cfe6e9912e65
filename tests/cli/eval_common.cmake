# Shared by the eval CLI tests: run bgtq, check exit codes, and compare Block-GTQ with
# uniform TQ-MSE layer by layer in an eval JSON.
include(${CMAKE_CURRENT_LIST_DIR}/common.cmake)

# Fails unless bgtq@B has a lower logit MAE than tq@B in every layer of eval JSON `json`.
function(bgtq_expect_wins json bits what)
  string(JSON nl LENGTH "${json}" layers)
  math(EXPR last "${nl} - 1")
  foreach(b IN LISTS bits)
    foreach(l RANGE 0 ${last})
      string(JSON tq GET "${json}" layers ${l} results "tq@${b}" logit_mae)
      string(JSON bg GET "${json}" layers ${l} results "bgtq@${b}" logit_mae)
      if(NOT bg LESS tq)
        message(FATAL_ERROR "${what}: layer ${l} at ${b} bits: Block-GTQ logit MAE ${bg} is not below TQ-MSE ${tq}")
      endif()
      message(STATUS "${what}: layer ${l} @${b} bits: tq ${tq} bgtq ${bg}")
    endforeach()
  endforeach()
endfunction()
