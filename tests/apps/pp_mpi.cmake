# Pipeline parallelism under mpirun: `weft train --preset tiny --pp 2` (two
# processes, one stage each) gives bitwise the per-step losses of the same
# run as rank threads (the pipeline group has two ranks: its sums add the last
# stage's loss to zeros), and the banners name the layouts.
#   WEFT  the weft binary;  MPIRUN  the mpirun command, "|"-separated;  DIR  a scratch directory
set(run ${WEFT} train --preset tiny --tp 1 --pp 2 --grad-accum 4 --micro-batch 1 --steps 4
    --eval-every 0 --sample-tokens 0 --log-every 0)
file(REMOVE "${DIR}/pp-threads.jsonl" "${DIR}/pp-mpi.jsonl")
include(${CMAKE_CURRENT_LIST_DIR}/../support/run_ok.cmake)
string(REPLACE "|" ";" mpirun "${MPIRUN}")
run_ok(WORKING_DIRECTORY ${DIR} COMMAND ${run} --metrics pp-threads.jsonl
       EXPECT "ranks 2 on the local backend: tp 1 x dp 1 x pp 2")
run_ok(WORKING_DIRECTORY ${DIR} COMMAND ${mpirun} 2 ${run} --metrics pp-mpi.jsonl
       EXPECT "ranks 2 on the mpi backend: tp 1 x dp 1 x pp 2")
include(${CMAKE_CURRENT_LIST_DIR}/../support/metrics_losses.cmake)
losses(pp-threads.jsonl a)
losses(pp-mpi.jsonl b)
message("pp threads: ${a}\npp mpirun:  ${b}")
list(LENGTH a n)
if(NOT n EQUAL 4 OR NOT a STREQUAL b)
  message(FATAL_ERROR "pp: the mpirun run's losses differ from the threads run's")
endif()
