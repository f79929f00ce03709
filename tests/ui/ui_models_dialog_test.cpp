// File > Models... by clicks (issue #43): the models folder as a table (a
// readable GGUF with its architecture, an unreadable one said so), a download
// from an http URL served by the test (progress, then the new row, the bytes
// equal), a URL of another scheme refused in the status line, Delete after a
// confirmation, Open handing the path to the window.
#include <QApplication>
#include <QFile>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPushButton>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <httplib.h>
#include <thread>

#include "gb_qtest_main.h"
#include "ui_test_support.h"
#include "window/models_dialog.h"

using namespace gbuitest;

class UiModelsDialogTest : public QObject {
  Q_OBJECT

  template <class W>
  W* named(QWidget& root, const char* name) {
    W* w = root.findChild<W*>(QLatin1String(name));
    if (!w) qWarning("no widget named %s", name);
    return w;
  }

  QStringList fileColumn(QTableWidget* table) {
    QStringList out;
    for (int r = 0; r < table->rowCount(); ++r) out << table->item(r, 0)->text();
    return out;
  }

 private slots:
  void initTestCase() { QStandardPaths::setTestModeEnabled(true); }

  void listsDownloadsDeletesAndOpens() {
    const QString gguf = sharedFile("models/stories260K/stories260K.gguf");
    QVERIFY2(QFile::exists(gguf), qPrintable("missing test data: " + gguf));
    QTemporaryDir dir;
    QVERIFY(QFile::copy(gguf, dir.filePath("stories.gguf")));
    QFile junk(dir.filePath("junk.gguf"));
    QVERIFY(junk.open(QIODevice::WriteOnly));
    junk.write("this is not a model");
    junk.close();

    gbui::ModelsDialog dialog(dir.path());
    dialog.show();
    auto* table = named<QTableWidget>(dialog, "modelsTable");
    QCOMPARE(fileColumn(table), QStringList({"junk.gguf", "stories.gguf"}));
    QCOMPARE(table->item(1, 1)->text(), QStringLiteral("llama"));
    QVERIFY(table->item(0, 2)->text().startsWith(QStringLiteral("cannot read")));
    QCOMPARE(table->item(1, 5)->text(), QStringLiteral("yes"));

    // A download from a URL this test serves.
    QFile source(gguf);
    QVERIFY(source.open(QIODevice::ReadOnly));
    const QByteArray bytes = source.readAll();
    httplib::Server http;
    http.Get("/files/new.gguf", [&](const httplib::Request&, httplib::Response& res) {
      res.set_content(std::string(bytes.constData(), static_cast<size_t>(bytes.size())), "application/octet-stream");
    });
    const int port = http.bind_to_any_port("127.0.0.1");
    std::thread server([&] { http.listen_after_bind(); });
    auto* spec = named<QLineEdit>(dialog, "modelsSpec");
    QSignalSpy finished(dialog.library(), &gbui::ModelLibrary::finished);
    spec->setText(QStringLiteral("http://127.0.0.1:%1/files/new.gguf").arg(port));
    QTest::mouseClick(named<QPushButton>(dialog, "modelsDownload"), Qt::LeftButton);
    QVERIFY(finished.wait(30000));
    http.stop();
    server.join();
    QVERIFY2(finished.at(0).at(1).toString().isEmpty(), qPrintable(finished.at(0).at(1).toString()));
    QVERIFY2(dialog.status().startsWith(QStringLiteral("Downloaded")), qPrintable(dialog.status()));
    QCOMPARE(fileColumn(table), QStringList({"junk.gguf", "new.gguf", "stories.gguf"}));
    QFile got(dir.filePath("new.gguf"));
    QVERIFY(got.open(QIODevice::ReadOnly));
    QCOMPARE(got.readAll(), bytes);
    QVERIFY(!QFile::exists(dir.filePath("new.gguf.part")));

    // Another scheme: refused at once, nothing started.
    spec->setText(QStringLiteral("ftp://example.org/x.gguf"));
    QTest::mouseClick(named<QPushButton>(dialog, "modelsDownload"), Qt::LeftButton);
    QVERIFY2(dialog.status().contains(QStringLiteral("only http")), qPrintable(dialog.status()));
    QVERIFY(!dialog.library()->busy());

    // Delete the junk after confirming.
    table->selectRow(0);
    QTest::mouseClick(named<QPushButton>(dialog, "modelsDelete"), Qt::LeftButton);
    auto* confirm = dialog.findChild<QMessageBox*>(QStringLiteral("modelsDeleteConfirm"));
    QVERIFY(confirm);
    QTest::mouseClick(confirm->findChild<QPushButton*>(QStringLiteral("modelsDeleteYes")), Qt::LeftButton);
    QTRY_VERIFY(!QFile::exists(dir.filePath("junk.gguf")));
    QCOMPARE(fileColumn(table), QStringList({"new.gguf", "stories.gguf"}));

    // Open hands the selected model to the window.
    QSignalSpy open(&dialog, &gbui::ModelsDialog::openRequested);
    table->selectRow(1);
    QTest::mouseClick(named<QPushButton>(dialog, "modelsOpen"), Qt::LeftButton);
    QCOMPARE(open.count(), 1);
    QCOMPARE(open.at(0).at(0).toString(), dir.filePath("stories.gguf"));
  }
};

GB_QTEST_MAIN(UiModelsDialogTest);
#include "ui_models_dialog_test.moc"
