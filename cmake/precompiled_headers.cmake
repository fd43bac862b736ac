# ALLOCGUARD_PCH: precompile the headers nearly every C++ source of the tree
# includes once, instead of parsing them again in every source.
# scripts/demo.sh's tree turns it on: on a fresh machine the demo compiles
# `allocguard` and the demo workload from nothing. It saves about a tenth of
# that compile (docs/e2e.md, "Clone to first verdict", measured per source and
# for the whole build): most of a source's time is its own code, not these
# headers. The test command's trees leave it off: they share their objects
# through the compiler cache with the image build, and clang-tidy reads their
# compile commands.
#
# The set (cmake/pch.h): nlohmann/json (about 1.1 CPU-s per source on its own
# at -O2 -g1) and the standard headers most sources include. spdlog is left
# out (its compiled-library definitions come only with the targets that link
# it), and so is CLI11 (3.7 CPU-s to parse, but in the command-line sources
# only).
option(ALLOCGUARD_PCH "Precompile the common heavy headers once (the demo's tree)" OFF)

# GCC 12 loses, for code read from a precompiled header, the fact that it
# comes from a system header, and then reports its known false positives in
# std::string's inlined copies (-Warray-bounds, -Wstringop-overflow,
# -Wstringop-overread, -Wrestrict; GCC bugs 105329, 105651) that it does not
# report for the same sources compiled without one (checked: the same
# source with the same headers passed by -include compiles clean). The
# release tree, which is the one built with warnings as errors by the test
# command, keeps all four.
if(ALLOCGUARD_PCH AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-Wno-array-bounds>
                      $<$<COMPILE_LANGUAGE:CXX>:-Wno-stringop-overflow>
                      $<$<COMPILE_LANGUAGE:CXX>:-Wno-stringop-overread>
                      $<$<COMPILE_LANGUAGE:CXX>:-Wno-restrict>)
endif()

# One target compiles cmake/pch.h; every other C++ library and program of the
# tree reuses that precompiled header (REUSE_FROM) instead of compiling its own,
# which would cost more than the parsing it saves (measured per target: about
# 6 CPU-s each against under a second saved per source). GCC accepts the one
# header in every target because the targets' compile flags are the same and
# the definitions some add (spdlog's, fmt's) do not touch what it includes.
if(ALLOCGUARD_PCH)
  add_library(allocguard_pch STATIC ${CMAKE_SOURCE_DIR}/cmake/pch.cc)
  target_link_libraries(allocguard_pch PRIVATE nlohmann_json::nlohmann_json)
  target_precompile_headers(allocguard_pch PRIVATE ${CMAKE_SOURCE_DIR}/cmake/pch.h)
endif()

# Makes every C++ library and program defined in DIR and below it reuse
# allocguard_pch's precompiled header.
function(allocguard_precompile_headers dir)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(target STREQUAL "allocguard_pch"
       OR NOT type MATCHES "^(STATIC_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
      continue()
    endif()
    get_target_property(sources ${target} SOURCES)
    list(FILTER sources INCLUDE REGEX "\\.cc$")
    if(NOT sources)
      continue()  # a C library or program: nothing to precompile for it
    endif()
    target_precompile_headers(${target} REUSE_FROM allocguard_pch)
  endforeach()
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(subdir IN LISTS subdirs)
    allocguard_precompile_headers(${subdir})
  endforeach()
endfunction()
