// File > Models... by clicks (issue #43): the models folder as a table (a
// readable GGUF with its architecture, an unreadable one said so), a download
// from an http URL served by the test (progress, then the new row, the bytes
// equal), a URL of another scheme refused in the status line, Delete after a
// confirmation, Open handing the path to the window. The catalog: a test
// catalog's rows (name, size, type, fits, downloaded), Download of an entry
// from a local hub mimic (its listing's size and sha256, then the row says
// downloaded). The first start: File > Open model... with an empty models
// folder shows the catalog ("Download a model") and not the file dialog;
// "Browse for a file..." then shows the file dialog; with a model in the
// folder the file dialog comes at once.
#include <QApplication>
#include <QCryptographicHash>
#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QMenu>
#include <QMenuBar>
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

  QStringList catalogRow(QTableWidget* table, int row) {
    QStringList out;
    for (int c = 0; c < table->columnCount(); ++c) out << table->item(row, c)->text();
    return out;
  }

  static QByteArray storiesBytes() {
    QFile f(sharedFile("models/stories260K/stories260K.gguf"));
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
  }

  // A user catalog (XDG_DATA_HOME/glassbox/catalog.json) of two entries: the
  // stories model in acme/tiny-GGUF, and one too large for any machine.
  static bool writeTestCatalog(const QString& dataHome, qint64 storiesSize) {
    QDir().mkpath(dataHome + QStringLiteral("/glassbox"));
    QFile f(dataHome + QStringLiteral("/glassbox/catalog.json"));
    if (!f.open(QIODevice::WriteOnly)) return false;
    f.write(QStringLiteral(R"({"format_version": 1, "models": [
      {"id": "stories-test", "name": "Stories Test", "repo": "acme/tiny-GGUF", "file": "stories-test.gguf",
       "size_bytes": %1, "weight_type": "F32", "architecture": "llama", "parameters": 260000,
       "context_length": 512, "license": "mit", "description": "The starter model, served by the test.",
       "kv_bytes_per_token": 1024},
      {"id": "huge-test", "name": "Huge Test", "repo": "acme/huge-GGUF", "file": "huge-Q4_K_M.gguf",
       "size_bytes": 1099511627776, "weight_type": "Q4_K_M", "architecture": "llama", "parameters": 1000000000000,
       "context_length": 4096, "license": "mit", "description": "No machine holds it."}]})")
                .arg(storiesSize)
                .toUtf8());
    return true;
  }

  // A hub mimic for acme/tiny-GGUF: the tree listing (size, LFS sha256) and the file.
  static int serveTinyRepo(httplib::Server& http, const QByteArray& bytes, QStringList* requests) {
    const std::string body(bytes.constData(), static_cast<size_t>(bytes.size()));
    const std::string sha = QCryptographicHash::hash(bytes, QCryptographicHash::Sha256).toHex().toStdString();
    // (moc cannot read this as a raw string literal: built as JSON.)
    const QJsonObject lfs{{"oid", QString::fromStdString("sha256:" + sha)}, {"size", bytes.size()}};
    const QJsonObject file{{"type", "file"}, {"path", "stories-test.gguf"}, {"size", bytes.size()}, {"lfs", lfs}};
    const std::string listing = QJsonDocument(QJsonArray{file}).toJson(QJsonDocument::Compact).toStdString();
    http.Get("/api/models/acme/tiny-GGUF/tree/main", [listing, requests](const httplib::Request& req, httplib::Response& res) {
      *requests << QString::fromStdString(req.path);
      res.set_content(listing, "application/json");
    });
    http.Get("/acme/tiny-GGUF/resolve/main/stories-test.gguf", [body, requests](const httplib::Request& req, httplib::Response& res) {
      *requests << QString::fromStdString(req.path);
      res.set_content(body, "application/octet-stream");
    });
    return http.bind_to_any_port("127.0.0.1");
  }

  // Clicks File, then the action called `actionName`.
  void chooseFileMenu(QMainWindow& window, const char* actionName) {
    QMenuBar* bar = window.menuBar();
    QMenu* menu = window.findChild<QMenu*>(QStringLiteral("menuFile"));
    QVERIFY(menu);
    QTest::mouseClick(bar, Qt::LeftButton, {}, bar->actionGeometry(menu->menuAction()).center());
    QTRY_VERIFY(menu->isVisible());
    QAction* action = window.findChild<QAction*>(QLatin1String(actionName));
    QVERIFY(action && menu->actions().contains(action));
    QTest::mouseClick(menu, Qt::LeftButton, {}, menu->actionGeometry(action).center());
  }

  static gbui::ModelsDialog* visibleModelsDialog(QWidget& window) {
    for (auto* d : window.findChildren<gbui::ModelsDialog*>())
      if (d->isVisible()) return d;
    return nullptr;
  }

  QTemporaryDir dataHome_;  // XDG_DATA_HOME for every case: the user catalog lives there

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QVERIFY(dataHome_.isValid());
    qputenv("XDG_DATA_HOME", dataHome_.path().toUtf8());
  }

  void cleanup() {
    QFile::remove(dataHome_.filePath(QStringLiteral("glassbox/catalog.json")));
    qunsetenv("GLASSBOX_MODELS_DIR");
    qunsetenv("HF_ENDPOINT");
  }

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

  void catalogRowsAndDownload() {
    const QByteArray bytes = storiesBytes();
    QVERIFY2(!bytes.isEmpty(), "missing test data: models/stories260K/stories260K.gguf");
    QVERIFY(writeTestCatalog(dataHome_.path(), bytes.size()));
    httplib::Server http;
    QStringList requests;
    const int port = serveTinyRepo(http, bytes, &requests);
    std::thread server([&] { http.listen_after_bind(); });
    qputenv("HF_ENDPOINT", QStringLiteral("http://127.0.0.1:%1").arg(port).toUtf8());
    QTemporaryDir models;

    gbui::ModelsDialog dialog(models.path());
    dialog.show();
    auto* table = named<QTableWidget>(dialog, "catalogTable");
    QVERIFY(table);
    QCOMPARE(table->rowCount(), 2);
    const QString size = QLocale().formattedDataSize(bytes.size());
    QCOMPARE(catalogRow(table, 0), QStringList({"Stories Test", size, "F32", "llama", "yes", "no"}));
    QCOMPARE(table->item(1, 0)->text(), QStringLiteral("Huge Test"));
    QVERIFY2(table->item(1, 4)->text().startsWith(QStringLiteral("no (")), qPrintable(table->item(1, 4)->text()));
    QVERIFY(named<QLabel>(dialog, "catalogDetails")->text().contains(QStringLiteral("acme/tiny-GGUF:stories-test.gguf")));

    // Download the first entry: through the hub's listing, verified, into the folder.
    QSignalSpy finished(dialog.library(), &gbui::ModelLibrary::finished);
    table->selectRow(0);
    auto* download = named<QPushButton>(dialog, "catalogDownload");
    QVERIFY(download->isEnabled());
    QTest::mouseClick(download, Qt::LeftButton);
    QVERIFY(!download->isEnabled());  // one download at a time
    QVERIFY(named<QPushButton>(dialog, "modelsCancel")->isEnabled());
    QVERIFY(finished.wait(30000));
    http.stop();
    server.join();
    QVERIFY2(finished.at(0).at(1).toString().isEmpty(), qPrintable(finished.at(0).at(1).toString()));
    QCOMPARE(requests, QStringList({"/api/models/acme/tiny-GGUF/tree/main", "/acme/tiny-GGUF/resolve/main/stories-test.gguf"}));
    QFile got(models.filePath("stories-test.gguf"));
    QVERIFY(got.open(QIODevice::ReadOnly));
    QCOMPARE(got.readAll(), bytes);
    QCOMPARE(table->item(0, 5)->text(), QStringLiteral("yes"));
    table->selectRow(0);
    QVERIFY(!download->isEnabled());  // nothing to download again
    QCOMPARE(fileColumn(named<QTableWidget>(dialog, "modelsTable")), QStringList({"stories-test.gguf"}));
  }

  void firstStartShowsTheCatalogInsteadOfTheFileDialog() {
    const QByteArray bytes = storiesBytes();
    QVERIFY2(!bytes.isEmpty(), "missing test data: models/stories260K/stories260K.gguf");
    QVERIFY(writeTestCatalog(dataHome_.path(), bytes.size()));
    QTemporaryDir models, session;
    qputenv("GLASSBOX_MODELS_DIR", models.path().toUtf8());
    auto window = makeWindow(session);
    int fileDialogs = 0;
    QString answer;  // what the file dialog chooses
    window->setModelFileChooser([&](QWidget*) {
      ++fileDialogs;
      return answer;
    });

    // An empty folder (a part of a download is no model): the catalog, not the file dialog.
    QFile part(models.filePath("other.gguf.part"));
    QVERIFY(part.open(QIODevice::WriteOnly));
    part.write("GGUF");
    part.close();
    chooseFileMenu(*window, "actionOpenModel");
    QTRY_VERIFY(visibleModelsDialog(*window) != nullptr);
    gbui::ModelsDialog* first = visibleModelsDialog(*window);
    QCOMPARE(first->mode(), gbui::ModelsDialog::Mode::FirstStart);
    QCOMPARE(first->windowTitle(), QStringLiteral("Download a model"));
    QCOMPARE(named<QTableWidget>(*first, "catalogTable")->rowCount(), 2);
    QVERIFY(!named<QWidget>(*first, "modelsFolderSection")->isVisible());  // nothing in it yet
    QCOMPARE(fileDialogs, 0);
    // Browse for a file...: the catalog closes, the file dialog comes.
    QTest::mouseClick(named<QPushButton>(*first, "modelsBrowse"), Qt::LeftButton);
    QTRY_COMPARE(fileDialogs, 1);
    QVERIFY(visibleModelsDialog(*window) == nullptr);

    // A model in the folder: the file dialog at once, and what it chooses opens.
    QVERIFY(QFile::copy(sharedFile("models/stories260K/stories260K.gguf"), models.filePath("stories.gguf")));
    answer = models.filePath("stories.gguf");
    QSignalSpy ready(window.get(), &gbui::MainWindow::modelReady);
    chooseFileMenu(*window, "actionOpenModel");
    QTRY_COMPARE(fileDialogs, 2);
    QVERIFY(visibleModelsDialog(*window) == nullptr);
    QVERIFY(ready.wait(30000));
  }
};

GB_QTEST_MAIN(UiModelsDialogTest);
#include "ui_models_dialog_test.moc"
