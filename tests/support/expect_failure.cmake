# Runs COMMAND (a ;-list), passes when it exits with a non-zero status within
# WITHIN seconds and its output matches EXPECT. Used for jobs that must fail,
# quickly, and not hang: a job killed at the timeout fails the test.
separate_arguments(cmd NATIVE_COMMAND "${COMMAND}")
if(NOT WITHIN)
  set(WITHIN 30)
endif()
string(TIMESTAMP start "%s")
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out
                TIMEOUT ${WITHIN})
string(TIMESTAMP end "%s")
math(EXPR took "${end} - ${start}")
message("${out}")
if(NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "the job did not end by itself within ${WITHIN} s: ${rc}")
endif()
if(rc EQUAL 0)
  message(FATAL_ERROR "the job exited with status 0; it should have failed")
endif()
if(NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "the output does not match '${EXPECT}' (exit status ${rc})")
endif()
message("failed as expected in ${took} s (exit status ${rc})")
