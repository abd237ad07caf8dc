# Included by the ctest scripts (cmake -P): run(COMMAND...) runs one step and stops the
# script with the step's output when it fails.
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "failed (${rc}): ${cmd}\n${out}")
  endif()
  message(STATUS "ok: ${ARGV0} ${ARGV1} ${ARGV2}")
endfunction()
