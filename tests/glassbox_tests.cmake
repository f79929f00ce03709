# glassbox_add_test(NAME SOURCES a.cpp ... LIBS lib ... LABELS cpu model ... [TIMEOUT s])
# Builds one test executable on the shared runner and registers it with CTest.
# Exit code 77 means "skipped" (e.g. CUDA tests on a machine without a GPU).
function(glassbox_add_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE glassbox_test_main ${T_LIBS} glassbox_warnings)
  add_test(NAME ${name} COMMAND ${name})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  set_tests_properties(${name} PROPERTIES
    LABELS "${T_LABELS}"
    SKIP_RETURN_CODE 77
    TIMEOUT ${T_TIMEOUT}
    ENVIRONMENT "QT_QPA_PLATFORM=offscreen;GLASSBOX_SHARED_DIR=${GLASSBOX_SHARED_DIR}")
endfunction()
