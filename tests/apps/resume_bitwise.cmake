# `weft train` stopped halfway (--stop-at) and resumed continues bitwise
# identically: the per-step losses of the metrics files are the same text
# (JSON numbers are written in the shortest form that reads back exactly).
# The stopped run must end at step 4 with a checkpoint and the resumed one
# start from it.
#   WEFT  the weft binary;  DIR  a scratch directory
set(run ${WEFT} train --steps 8 --micro-batch 4 --dropout 0.1 --eval-every 0 --sample-tokens 0
    --log-every 0)
# No output of an earlier run may count (a resumed run appends to its metrics).
file(REMOVE_RECURSE "${DIR}/rb" "${DIR}/straight.jsonl" "${DIR}/resumed.jsonl")
include(${CMAKE_CURRENT_LIST_DIR}/../support/run_ok.cmake)
function(expect_lines file n)
  file(STRINGS "${DIR}/${file}" lines)
  list(LENGTH lines have)
  if(NOT have EQUAL n)
    message(FATAL_ERROR "${file} has ${have} lines, expected ${n}")
  endif()
endfunction()
run_ok(WORKING_DIRECTORY ${DIR} COMMAND ${run} --metrics straight.jsonl EXPECT "\ndone: 8 steps")
run_ok(WORKING_DIRECTORY ${DIR} COMMAND ${run} --stop-at 4 --save rb --metrics resumed.jsonl
     EXPECT "\nstep 4: checkpoint written to rb/step-000004\ndone: 4 steps")
expect_lines(resumed.jsonl 4)
# --resume alone: the saved run's settings, its --save and --metrics included.
run_ok(WORKING_DIRECTORY ${DIR} COMMAND ${WEFT} train --resume rb
     EXPECT "\nfrom checkpoint rb: dropout 0.1, steps 8, micro-batch 4, save rb, eval-every 0, metrics resumed.jsonl, log-every 0, sample-tokens 0\nresumed from rb at step 4\n.*\nstep 8: checkpoint written to rb/step-000008\ndone: 4 steps")
expect_lines(resumed.jsonl 8)
include(${CMAKE_CURRENT_LIST_DIR}/../support/metrics_losses.cmake)
losses(straight.jsonl a)
losses(resumed.jsonl b)
message("straight: ${a}\nresumed:  ${b}")
list(LENGTH a n)
if(NOT n EQUAL 8 OR NOT a STREQUAL b)
  message(FATAL_ERROR "the resumed run's losses differ from the straight run's")
endif()
message("8 steps, bitwise identical")
