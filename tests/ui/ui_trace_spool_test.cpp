// The trace spool folder's size cap (trace_spool.h): oldest spools go first
// until the folder fits, and never one that is being written (this process's,
// or one whose lock a running process holds); a dead process's lock protects
// nothing; the cap comes from the settings.
#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QLockFile>
#include <QSettings>
#include <QStandardPaths>
#include <QSysInfo>
#include <QTemporaryDir>
#include <QTest>

#include "gb_qtest_main.h"
#include "bridge/trace_spool.h"

namespace {

// A spool of `bytes` bytes last written `ageMinutes` ago.
void writeSpool(const QDir& dir, const QString& name, qint64 bytes, int ageMinutes) {
  QFile f(dir.filePath(name));
  QVERIFY(f.open(QIODevice::WriteOnly));
  QVERIFY(f.write(QByteArray(bytes, 'x')) == bytes);
  f.close();  // the buffered write lands now; the time set below must come after it
  QVERIFY(f.open(QIODevice::ReadWrite));
  QVERIFY(f.setFileTime(QDateTime::currentDateTimeUtc().addSecs(-60 * ageMinutes), QFileDevice::FileModificationTime));
}

}  // namespace

class TraceSpoolTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QCoreApplication::setOrganizationName("GlassboxTest");
  }

  void oldestGoFirstUntilTheFolderFits() {
    QTemporaryDir tmp;
    QDir d(tmp.path());
    // Oldest to newest: a (5 h), b (4 h), c (3 h), d (2 h), e (1 h); 100 bytes each.
    const QStringList names = {"session-a-11-0.jsonl", "session-b-11-0.jsonl", "session-c-11-0.jsonl",
                               "session-d-11-0.jsonl", "session-e-11-0.jsonl"};
    for (int i = 0; i < names.size(); ++i) writeSpool(d, names[i], 100, 300 - 60 * i);
    writeSpool(d, "notes.txt", 5000, 600);  // not a spool: neither counted nor removed
    const gbui::SpoolPruning p = gbui::pruneTraceSpools(d.path(), 250, QStringLiteral("-99999-"));
    QCOMPARE(p.bytesBefore, qint64{500});
    QCOMPARE(p.removed, QStringList({names[0], names[1], names[2]}));
    QCOMPARE(p.bytesAfter, qint64{200});
    for (int i = 0; i < names.size(); ++i) QCOMPARE(d.exists(names[i]), i >= 3);
    QVERIFY(d.exists("notes.txt"));
    // Under the cap: nothing more goes.
    QVERIFY(gbui::pruneTraceSpools(d.path(), 250, QStringLiteral("-99999-")).removed.isEmpty());
  }

  void spoolsBeingWrittenStay() {
    QTemporaryDir tmp;
    QDir d(tmp.path());
    writeSpool(d, "session-old-4242-0.jsonl", 100, 500);   // this process's (marker -4242-)
    writeSpool(d, "session-old-7-0.jsonl", 100, 400);      // locked by a running process
    writeSpool(d, "session-old-8-0.jsonl", 100, 300);      // locked by a process that died
    writeSpool(d, "session-new-9-0.jsonl", 100, 10);
    QLockFile live(gbui::spoolLockPath(d.filePath("session-old-7-0.jsonl")));
    QVERIFY(live.tryLock(0));  // held by this running test process: "another" writer
    {
      // A lock file naming a process that does not exist (the format QLockFile writes).
      QFile dead(gbui::spoolLockPath(d.filePath("session-old-8-0.jsonl")));
      QVERIFY(dead.open(QIODevice::WriteOnly));
      dead.write(QByteArray("999999999\nglassbox\n") + QSysInfo::machineHostName().toUtf8() + "\n");
    }
    const gbui::SpoolPruning p = gbui::pruneTraceSpools(d.path(), 0, QStringLiteral("-4242-"));
    QCOMPARE(p.removed, QStringList({"session-old-8-0.jsonl", "session-new-9-0.jsonl"}));
    QVERIFY(d.exists("session-old-4242-0.jsonl"));
    QVERIFY(d.exists("session-old-7-0.jsonl"));
    QCOMPARE(p.bytesAfter, qint64{200});  // over the cap, but both are in use
    live.unlock();
    QCOMPARE(gbui::pruneTraceSpools(d.path(), 0, QStringLiteral("-4242-")).removed,
             QStringList({"session-old-7-0.jsonl"}));
  }

  void capComesFromTheSettings() {
    QSettings().remove("traces/spoolCapMB");
    QCOMPARE(gbui::traceSpoolCapBytes(), gbui::kDefaultSpoolCapMiB * 1024 * 1024);
    QSettings().setValue("traces/spoolCapMB", 3);
    QCOMPARE(gbui::traceSpoolCapBytes(), qint64{3} * 1024 * 1024);
    QSettings().setValue("traces/spoolCapMB", "lots");
    QCOMPARE(gbui::traceSpoolCapBytes(), gbui::kDefaultSpoolCapMiB * 1024 * 1024);
    QSettings().remove("traces/spoolCapMB");
  }
};

GB_QTEST_MAIN(TraceSpoolTest);
#include "ui_trace_spool_test.moc"
