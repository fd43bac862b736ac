# allocguard_add_test(NAME name SOURCES a_test.cc ... LIBS lib ... [LABELS l ...])
# Builds one GoogleTest binary and registers its tests with ctest.
include(GoogleTest)
function(allocguard_add_test)
  cmake_parse_arguments(T "" "NAME" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main GTest::gmock)
  if(NOT T_LABELS)
    set(T_LABELS unit)
  endif()
  if(ALLOCGUARD_TSAN AND "controlplane" IN_LIST T_LABELS)
    # The ThreadSanitizer tree runs the unit and integration tests only
    # (docs/reliability.md): its control-plane tests are defined, for the
    # CMakeLists that refer to them, but neither built nor registered.
    set_target_properties(${T_NAME} PROPERTIES EXCLUDE_FROM_ALL TRUE)
    return()
  endif()
  gtest_discover_tests(${T_NAME} PROPERTIES LABELS "${T_LABELS}" DISCOVERY_TIMEOUT 60)
endfunction()
