// Qt Test runner: the executable's first argument names the test; its GB_TEST
// cases become the data rows of GbTestRunner::cases(), or its Qt Test class runs
// (GB_QTEST_MAIN).
#include <QCoreApplication>
#include <QObject>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gb_test.h"

namespace {
std::string g_skip_all_reason;
}

void gbtest::skip_all(const std::string& reason) { g_skip_all_reason = reason; }

class GbTestRunner : public QObject {
  Q_OBJECT
 public:
  explicit GbTestRunner(const char* group) : group_(group) {}

 private slots:
  void cases_data() {
    QTest::addColumn<int>("index");
    const auto& cases = gbtest::registry();
    for (int i = 0; i < static_cast<int>(cases.size()); ++i)
      if (std::strcmp(cases[i].group, group_) == 0) QTest::newRow(cases[i].name) << i;
  }
  void cases() {
    QFETCH(int, index);
    gbtest::registry()[static_cast<size_t>(index)].fn();
  }

 private:
  const char* group_;
};

// Hook for binaries that must decide at start whether to run at all.
extern void gb_test_setup() __attribute__((weak));

namespace {
int run_cases(const char* group, int argc, char** argv) {
  QCoreApplication app(argc, argv);
  // As when every test was its own executable (settings and temporary files are per application).
  QCoreApplication::setApplicationName(QString::fromUtf8(group));
  if (gb_test_setup) gb_test_setup();
  if (!g_skip_all_reason.empty()) {
    std::printf("SKIP   : all cases: %s\n", g_skip_all_reason.c_str());
    gbtest::note_skip(g_skip_all_reason);
    return gbtest::kSkipExitCode;
  }
  GbTestRunner runner(group);
  const int failures = QTest::qExec(&runner, argc, argv);
  // Qt Test exits 0 when cases skip: a skipped case (and no failure) makes the
  // test Skipped for CTest (SKIP_RETURN_CODE).
  return failures == 0 && gbtest::num_skips() > 0 ? gbtest::kSkipExitCode : failures;
}
}  // namespace

int main(int argc, char** argv) { return gbtest::dispatch(argc, argv, run_cases); }

#include "gb_test_main_qt.moc"
