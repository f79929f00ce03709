# Test executables: one per test folder (tests/engine/kv -> glassbox_tests_engine_kv,
# tests/app -> glassbox_tests_app), each holding every test of its folder, so a clean
# build links about 15 test executables instead of one per test. Every test keeps
# its own CTest entry, labels, timeout and environment: CTest runs
# `glassbox_tests_<folder> NAME`, and the runner (tests/support/gb_test.h) runs
# only that test's cases. Exit code 77 means "skipped" (e.g. CUDA tests on a
# machine without a GPU).
#
# glassbox_add_test(NAME SOURCES a.cpp ... LIBS lib ... LABELS cpu model ... [TIMEOUT s])
#   Compiles the sources as an OBJECT library named NAME, with
#   GB_TEST_GROUP="NAME" (the group its GB_TEST cases or its GB_QTEST_MAIN class
#   register under), links it into the folder's executable and registers the
#   CTest test NAME. NAME stays a target, so target_compile_definitions(NAME ...),
#   target_include_directories(NAME ...), target_link_libraries(NAME ...) and
#   add_dependencies(NAME ...) work as on any target. The workbench tests
#   (tests/ui) have their own function, glassbox_add_ui_test.
#
# Precompiled headers (GLASSBOX_PCH, CMakeLists.txt): every test file includes
# QtTest, whose QtCore alone takes seconds to parse, so QtCore, nlohmann/json and
# the common standard headers are precompiled once (glassbox_test_pch, in
# tests/support) and every engine, kernel and CLI test reuses them; the workbench
# tests' executable has its own, with QtWidgets and QtTest (tests/ui). The shared
# one is built without Qt Test's defines: QT_TESTCASE_BUILDDIR names each folder,
# and GCC refuses a precompiled header in a file where a macro it was built with
# has another value (-Winvalid-pch, an error with GLASSBOX_WERROR). With ccache, the launcher needs
# sloppiness=pch_defines,time_macros (CMakeLists.txt adds it to a ccache launcher).
#
# Sources that several tests of a folder share (a gb_test_setup() hook, helpers)
# belong to the executable, once: glassbox_test_executable(exe) gives its name,
# then target_sources(${exe} PRIVATE ...).

# glassbox_test_executable(OUT_VAR): the current folder's test executable,
# created on first use.
function(glassbox_test_executable out)
  file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR}/tests ${CMAKE_CURRENT_SOURCE_DIR})
  string(REPLACE "/" "_" rel "${rel}")
  set(exe glassbox_tests_${rel})
  if(NOT TARGET ${exe})
    add_executable(${exe})
    target_link_libraries(${exe} PRIVATE glassbox_test_runner glassbox_warnings)
  endif()
  set(${out} ${exe} PARENT_SCOPE)
endfunction()

set(GLASSBOX_TEST_PCH_HEADERS
  <algorithm> <cmath> <cstdint> <cstring> <filesystem> <fstream> <functional> <map> <memory>
  <optional> <random> <set> <sstream> <string> <string_view> <thread> <unordered_map> <vector>
  <nlohmann/json.hpp>)

# glassbox_test_pch(TEST): TEST reuses the shared precompiled header.
function(glassbox_test_pch name)
  if(GLASSBOX_PCH AND TARGET glassbox_test_pch)
    target_precompile_headers(${name} REUSE_FROM glassbox_test_pch)
  endif()
endfunction()

# glassbox_pch_target(NAME HEADERS...): an object library that only builds a
# precompiled header for others to reuse (REUSE_FROM); link it what they link.
function(glassbox_pch_target pch)
  set(anchor ${CMAKE_CURRENT_BINARY_DIR}/${pch}.cpp)
  if(NOT EXISTS ${anchor})
    file(WRITE ${anchor} "// Builds the precompiled header ${pch}, which other targets reuse.\n")
  endif()
  add_library(${pch} OBJECT ${anchor})
  target_precompile_headers(${pch} PRIVATE ${ARGN})
endfunction()

function(glassbox_add_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  glassbox_test_executable(exe)
  add_library(${name} OBJECT ${T_SOURCES})
  target_compile_definitions(${name} PRIVATE GB_TEST_GROUP="${name}")
  target_link_libraries(${name} PRIVATE glassbox_test_main ${T_LIBS} glassbox_warnings)
  glassbox_test_pch(${name})
  target_link_libraries(${exe} PRIVATE ${name})
  glassbox_register_test(${name} ${exe} SKIPPABLE LABELS ${T_LABELS} TIMEOUT ${T_TIMEOUT})
endfunction()

# glassbox_register_test(NAME EXE [SKIPPABLE] LABELS ... [TIMEOUT s]): the CTest
# entry NAME runs `EXE NAME`; SKIPPABLE: exit code 77 means skipped.
function(glassbox_register_test name exe)
  cmake_parse_arguments(T "SKIPPABLE" "TIMEOUT" "LABELS" ${ARGN})
  add_test(NAME ${name} COMMAND ${exe} ${name})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  set_tests_properties(${name} PROPERTIES
    LABELS "${T_LABELS}"
    TIMEOUT ${T_TIMEOUT}
    ENVIRONMENT "QT_QPA_PLATFORM=offscreen;GLASSBOX_SHARED_DIR=${GLASSBOX_SHARED_DIR}")
  if(T_SKIPPABLE)
    set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77)
  endif()
endfunction()
