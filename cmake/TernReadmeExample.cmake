# ctest script (cmake -P): README.md must hold EXAMPLE (c_tests/example_engine.c) verbatim
# in a ```c block, so the example a reader copies is the one ctest compiles and runs.
# -D variables: README, EXAMPLE.
file(READ "${README}" readme)
file(READ "${EXAMPLE}" example)
string(FIND "${readme}" "```c\n${example}```" at)
if(at EQUAL -1)
  message(FATAL_ERROR "README.md does not show ${EXAMPLE} verbatim in a ```c block: copy the file into the README's engine example")
endif()
message(STATUS "README.md shows ${EXAMPLE} verbatim")
