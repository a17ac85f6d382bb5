# run_ok(COMMAND cmd... [EXPECT regex] [WORKING_DIRECTORY dir]): runs the
# command and prints its output; fails the script unless it ends with status 0
# and, given EXPECT, its output (stdout and stderr together) matches.
function(run_ok)
  cmake_parse_arguments(PARSE_ARGV 0 R "" "EXPECT;WORKING_DIRECTORY" "COMMAND")
  if(NOT R_WORKING_DIRECTORY)
    set(R_WORKING_DIRECTORY .)
  endif()
  execute_process(COMMAND ${R_COMMAND} WORKING_DIRECTORY "${R_WORKING_DIRECTORY}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  message("${out}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "exit status ${rc}: ${R_COMMAND}")
  endif()
  if(DEFINED R_EXPECT AND NOT out MATCHES "${R_EXPECT}")
    message(FATAL_ERROR "the output does not match '${R_EXPECT}': ${R_COMMAND}")
  endif()
endfunction()
