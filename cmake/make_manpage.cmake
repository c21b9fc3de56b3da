# SPDX-License-Identifier: BSD-3-Clause
# Renders gradcodec.1 (man page, roff) from the help text of the built executable, so the page
# says what `gradcodec --help` and `gradcodec COMMAND --help` say. Run at build time:
#   cmake -DEXE=path/to/gradcodec -DVERSION=x.y.z -DOUT=gradcodec.1 -P make_manpage.cmake
cmake_minimum_required(VERSION 3.20)
set(commands encode decode inspect bench merge list)

# Help text as roff: backslashes and leading dots/quotes escaped, each line kept as it is (.nf).
function(roff_block text out_var)
  string(REPLACE "\\" "\\e" text "${text}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" text "${text}")
  set(${out_var} ".nf\n${text}\n.fi\n" PARENT_SCOPE)
endfunction()

function(help_of out_var)
  # A sanitizer build's executable renders the page too: its exit must not fail on a leak report.
  execute_process(COMMAND ${CMAKE_COMMAND} -E env ASAN_OPTIONS=detect_leaks=0 "${EXE}" ${ARGN} --help
                  OUTPUT_VARIABLE text RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${EXE} ${ARGN} --help failed (${rc})")
  endif()
  string(STRIP "${text}" text)
  set(${out_var} "${text}" PARENT_SCOPE)
endfunction()

help_of(top)
roff_block("${top}" top_roff)
set(page ".TH GRADCODEC 1 \"\" \"gradcodec ${VERSION}\" \"User Commands\"\n")
string(APPEND page ".SH NAME\ngradcodec \\- compress neural-network gradients into self-describing .gcz containers\n")
string(APPEND page ".SH SYNOPSIS\n.B gradcodec\n\\fICOMMAND\\fR [\\fIOPTIONS\\fR]\n")
string(APPEND page ".SH DESCRIPTION\n${top_roff}")
foreach(c IN LISTS commands)
  help_of(text ${c})
  roff_block("${text}" roff)
  string(TOUPPER "${c}" upper)
  string(APPEND page ".SH COMMAND ${upper}\n${roff}")
endforeach()
string(APPEND page ".SH EXIT STATUS\n0 success, 1 usage, 2 input, 3 corrupt container, 4 internal, 5 bench mismatch.\n")
string(APPEND page ".SH SEE ALSO\nThe documentation in the source tree: README.md and docs/.\n")
file(WRITE "${OUT}.tmp" "${page}")
file(RENAME "${OUT}.tmp" "${OUT}")
