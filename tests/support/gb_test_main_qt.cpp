// Qt Test runner: every GB_TEST case becomes one data row of GbTestRunner::cases().
#include <QCoreApplication>
#include <QObject>
#include <cstdio>
#include <string>

#include "gb_test.h"

namespace {
std::string g_skip_all_reason;
}

void gbtest::skip_all(const std::string& reason) { g_skip_all_reason = reason; }

class GbTestRunner : public QObject {
  Q_OBJECT
 private slots:
  void cases_data() {
    QTest::addColumn<int>("index");
    const auto& cases = gbtest::registry();
    for (int i = 0; i < static_cast<int>(cases.size()); ++i) QTest::newRow(cases[i].name) << i;
  }
  void cases() {
    QFETCH(int, index);
    gbtest::registry()[static_cast<size_t>(index)].fn();
  }
};

// Hook for binaries that must decide at start whether to run at all.
extern void gb_test_setup() __attribute__((weak));

int main(int argc, char** argv) {
  QCoreApplication app(argc, argv);
  if (gb_test_setup) gb_test_setup();
  if (!g_skip_all_reason.empty()) {
    std::printf("SKIP   : all cases: %s\n", g_skip_all_reason.c_str());
    return gbtest::kSkipExitCode;
  }
  GbTestRunner runner;
  return QTest::qExec(&runner, argc, argv);
}

#include "gb_test_main_qt.moc"
