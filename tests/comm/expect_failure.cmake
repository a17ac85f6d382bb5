# Runs COMMAND (a ;-list), passes when it exits non-zero and its output
# matches EXPECT. Used for jobs that must fail (and not hang).
separate_arguments(cmd NATIVE_COMMAND "${COMMAND}")
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out
                TIMEOUT 120)
message("${out}")
if(rc EQUAL 0)
  message(FATAL_ERROR "the job exited with status 0; it should have failed")
endif()
if(NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "the output does not match '${EXPECT}' (exit status ${rc})")
endif()
message("failed as expected (exit status ${rc})")
