# `weft train --precision fp8-delayed` stopped halfway and resumed continues
# bitwise identically: the checkpoint holds every amax history and scale
# (a short history, 3, so that the resumed steps roll entries saved by the
# first run). Without them the resumed run would quantize with fresh scales
# and its losses would differ.
#   WEFT  the weft binary;  DIR  a scratch directory
set(run ${WEFT} train --steps 8 --micro-batch 4 --eval-every 0 --sample-tokens 0 --log-every 0
    --precision fp8-delayed --amax-history 3)
file(REMOVE_RECURSE "${DIR}/rb8" "${DIR}/straight8.jsonl" "${DIR}/resumed8.jsonl")
include(${CMAKE_CURRENT_LIST_DIR}/../support/run_ok.cmake)
run_ok(WORKING_DIRECTORY ${DIR} COMMAND ${run} --metrics straight8.jsonl EXPECT "\ndone: 8 steps")
run_ok(WORKING_DIRECTORY ${DIR} COMMAND ${run} --stop-at 4 --save rb8 --metrics resumed8.jsonl
       EXPECT "\nstep 4: checkpoint written to rb8/step-000004\ndone: 4 steps")
run_ok(WORKING_DIRECTORY ${DIR} COMMAND ${WEFT} train --resume rb8
       EXPECT "precision fp8-delayed.*resumed from rb8 at step 4\n.*done: 4 steps")
include(${CMAKE_CURRENT_LIST_DIR}/../support/metrics_losses.cmake)
losses(straight8.jsonl a)
losses(resumed8.jsonl b)
message("straight: ${a}\nresumed:  ${b}")
list(LENGTH a n)
if(NOT n EQUAL 8 OR NOT a STREQUAL b)
  message(FATAL_ERROR "the resumed fp8-delayed run's losses differ from the straight run's")
endif()
message("fp8-delayed: 8 steps, bitwise identical")
