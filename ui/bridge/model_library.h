// ModelLibrary: the models folder, the catalog of well-known models and
// downloads for the workbench (the engine half of File > Models...,
// engine/download/model_download.h and catalog.h). Scans are header-only and
// the catalog a few KB, both read on the calling (UI) thread; a download runs on
// a thread of its own and reports progress and its end as queued signals.
// Threads: create and use on the UI thread; signals arrive there.
#pragma once

#include <QObject>
#include <QString>
#include <QVector>
#include <atomic>
#include <memory>
#include <thread>

namespace gbui {

struct UiLocalModel {
  QString path, fileName, architecture, weights;
  qint64 fileBytes = 0, neededBytes = 0, contextLength = 0;
  bool readable = false, fits = false;
};

// One catalog entry against this machine and the models folder.
struct UiCatalogEntry {
  QString id, name, spec;  // spec: REPO:FILE, what a download of it pulls
  QString fileName, weightType, architecture, license, description;
  QString localPath;  // where it is, or would go, in the models folder
  qint64 sizeBytes = 0, neededBytes = 0, parameters = 0, contextLength = 0;
  bool fits = false, downloaded = false;
};

struct UiCatalog {
  QVector<UiCatalogEntry> entries;
  QString path;      // the catalog read ("" when none was found)
  bool userCopy = false;
  QString problem;   // why no catalog, or why the user copy was passed over ("" when neither)
};

class ModelLibrary : public QObject {
  Q_OBJECT
 public:
  explicit ModelLibrary(QObject* parent = nullptr);
  ~ModelLibrary() override;  // cancels a running download and waits for its thread

  // GLASSBOX_MODELS_DIR, else $XDG_DATA_HOME/glassbox/models, else ~/.local/share/glassbox/models.
  static QString defaultDir();
  static QVector<UiLocalModel> scan(const QString& dir);
  // Whether `dir` holds a model (a *.gguf file; parts do not count), without
  // reading any.
  static bool hasModels(const QString& dir);
  // The catalog (the user copy when valid, else the shipped one) with each
  // entry's state against the models folder `dir`.
  static UiCatalog catalog(const QString& dir);

  // Starts downloading `spec` (OWNER/NAME[:FILE][@REVISION], an http(s) URL or a catalog id)
  // into `dir`; false (and `error`) when one is running already or `spec` is
  // not valid. Emits progress, then finished(path, "") or finished("", error).
  bool pull(const QString& spec, const QString& dir, QString& error);
  void cancel();
  bool busy() const { return worker_.joinable() && !done_.load(); }

 signals:
  void progress(qint64 done, qint64 total, double bytesPerSecond);
  void finished(const QString& path, const QString& error);

 private:
  void join();
  std::thread worker_;
  std::atomic<bool> cancel_{false};
  std::atomic<bool> done_{true};
};

}  // namespace gbui
