# A layout under mpirun: `weft train ARGS` as two processes gives bitwise the
# per-step losses of the same run as two rank threads (every group has two
# ranks: each reduction adds two values, in either order the same; point to
# point transfers move the same bytes), and the banners name the layout.
#   WEFT    the weft binary;  MPIRUN  the mpirun command, "|"-separated;  DIR  a scratch directory
#   NAME    a label (file names, messages)
#   ARGS    the train options, "|"-separated
#   LAYOUT  the layout the banners print ("tp 1 x dp 1 x pp 2")
string(REPLACE "|" ";" args "${ARGS}")
set(run ${WEFT} train ${args} --steps 4 --eval-every 0 --sample-tokens 0 --log-every 0)
file(REMOVE "${DIR}/${NAME}-threads.jsonl" "${DIR}/${NAME}-mpi.jsonl")
include(${CMAKE_CURRENT_LIST_DIR}/../support/run_ok.cmake)
string(REPLACE "|" ";" mpirun "${MPIRUN}")
run_ok(WORKING_DIRECTORY ${DIR} COMMAND ${run} --metrics ${NAME}-threads.jsonl
       EXPECT "ranks 2 on the local backend: ${LAYOUT}")
run_ok(WORKING_DIRECTORY ${DIR} COMMAND ${mpirun} 2 ${run} --metrics ${NAME}-mpi.jsonl
       EXPECT "ranks 2 on the mpi backend: ${LAYOUT}")
include(${CMAKE_CURRENT_LIST_DIR}/../support/metrics_losses.cmake)
losses(${NAME}-threads.jsonl a)
losses(${NAME}-mpi.jsonl b)
message("${NAME} threads: ${a}\n${NAME} mpirun:  ${b}")
list(LENGTH a n)
if(NOT n EQUAL 4 OR NOT a STREQUAL b)
  message(FATAL_ERROR "${NAME}: the mpirun run's losses differ from the threads run's")
endif()
