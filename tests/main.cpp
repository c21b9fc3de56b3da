// SPDX-License-Identifier: BSD-3-Clause
// The test runner: Catch2's main, compiled once (every other test file uses the precompiled header).
//
// Catch2's runner instantiates libstdc++'s <regex> (its test-spec matching), and GCC 12 at -O1 with
// the sanitizers warns -Wmaybe-uninitialized inside <regex> (std::function members of a temporary
// _State that the library moves only when set: a false positive in the standard library's own code,
// as in apps/name_filter.cpp). The sanitizer build treats warnings as errors, so this file, and only
// this one, silences that warning.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
