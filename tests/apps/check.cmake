# Runs one `weft` command line and checks how it ended.
#   COMMAND  the command, arguments separated by "|"
#   RC       the exit status it must have (default 0); with 2 (bad input) the
#            output must end in exactly one line "weft: error: ..."
#   MANY_ERRORS  with RC 2: several processes (mpirun) may each print the error
#   EXPECT   a regular expression its output (stdout + stderr) must match
#   REJECT   a regular expression its output must not match
#   LINES    a file that must exist afterwards, with this many lines (LINES_FILE)
string(REPLACE "|" ";" cmd "${COMMAND}")
if(NOT DEFINED RC)
  set(RC 0)
endif()
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out
                TIMEOUT 240)
message("${out}")
if(NOT rc STREQUAL "${RC}")
  message(FATAL_ERROR "exit status ${rc}, expected ${RC}")
endif()
if(RC EQUAL 2 AND NOT MANY_ERRORS)
  string(STRIP "${out}" stripped)
  string(FIND "${stripped}" "weft: error: " first)
  string(FIND "${stripped}" "weft: error: " last REVERSE)
  string(FIND "${stripped}" "\n" last_newline REVERSE)
  if(first EQUAL -1 OR NOT first EQUAL last OR last_newline GREATER first)
    message(FATAL_ERROR "the output must end in one line \"weft: error: ...\"")
  endif()
endif()
if(DEFINED EXPECT AND NOT out MATCHES "${EXPECT}")
  message(FATAL_ERROR "the output does not match '${EXPECT}'")
endif()
if(DEFINED REJECT AND out MATCHES "${REJECT}")
  message(FATAL_ERROR "the output matches '${REJECT}'")
endif()
if(DEFINED LINES_FILE)
  file(STRINGS "${LINES_FILE}" lines)
  list(LENGTH lines n)
  if(NOT n EQUAL LINES)
    message(FATAL_ERROR "${LINES_FILE} has ${n} lines, expected ${LINES}")
  endif()
endif()
