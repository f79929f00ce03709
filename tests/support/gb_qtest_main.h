// GB_QTEST_MAIN(TestClass): QTEST_MAIN for a Qt Test class that shares its
// executable with other tests (gb_test.h, tests/glassbox_tests.cmake). It
// registers the class as the main of the test its file is a source of (the
// test's CTest name, glassbox_add_ui_test), and that main does what QTEST_MAIN
// does -- a QApplication (QGuiApplication or QCoreApplication without Widgets or
// Gui) with 96 dpi, the class's initMain(), then QTest::qExec -- and names the
// application after the test, as its own executable did (QSettings and the
// per-application paths stay the test's own).
#pragma once

#include <QCoreApplication>
#include <QTest>

#include "gb_test_registry.h"

// The names it defines carry the class's name, so that several test files can
// share a unity batch (a class name is unique in the executable anyway: moc's
// output for it has external linkage).
#define GB_QTEST_MAIN(TestObject)                                                      \
  static int gb_qtest_main_##TestObject(int argc, char** argv) {                       \
    QT_PREPEND_NAMESPACE(QTest::Internal::callInitMain)<TestObject>();                 \
    QTEST_MAIN_SETUP()                                                                 \
    QCoreApplication::setApplicationName(QString::fromUtf8(::gbtest::current_test())); \
    TestObject tc;                                                                     \
    QTEST_SET_MAIN_SOURCE_PATH                                                         \
    return QTest::qExec(&tc, argc, argv);                                              \
  }                                                                                    \
  static const ::gbtest::SuiteRegistrar gb_qtest_suite_##TestObject(__FILE__, &gb_qtest_main_##TestObject)
