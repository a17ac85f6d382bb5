# Context parallelism under mpirun: `weft train --preset llama-tiny --cp 2`
# as two processes gives bitwise the per-step losses of the same run as rank
# threads (every group has two ranks: each reduction adds two values, in
# either order the same; the ring's send_recv moves the same bytes), and the
# banners name the layout.
#   WEFT  the weft binary;  MPIRUN  the mpirun command, "|"-separated;  DIR  a scratch directory
set(run ${WEFT} train --preset llama-tiny --seq 64 --steps 4 --micro-batch 2 --eval-every 0
    --sample-tokens 0 --log-every 0 --tp 1 --cp 2)
file(REMOVE "${DIR}/cp-threads.jsonl" "${DIR}/cp-mpi.jsonl")
include(${CMAKE_CURRENT_LIST_DIR}/../support/run_ok.cmake)
string(REPLACE "|" ";" mpirun "${MPIRUN}")
run_ok(WORKING_DIRECTORY ${DIR} COMMAND ${run} --metrics cp-threads.jsonl
       EXPECT "ranks 2 on the local backend: tp 1 x cp 2 x dp 1")
run_ok(WORKING_DIRECTORY ${DIR} COMMAND ${mpirun} 2 ${run} --metrics cp-mpi.jsonl
       EXPECT "ranks 2 on the mpi backend: tp 1 x cp 2 x dp 1")
include(${CMAKE_CURRENT_LIST_DIR}/../support/metrics_losses.cmake)
losses(cp-threads.jsonl a)
losses(cp-mpi.jsonl b)
message("cp threads: ${a}\ncp mpirun:  ${b}")
list(LENGTH a n)
if(NOT n EQUAL 4 OR NOT a STREQUAL b)
  message(FATAL_ERROR "cp: the mpirun run's losses differ from the threads run's")
endif()
