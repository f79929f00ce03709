// ModelLibrary: the models folder and downloads for the workbench (the engine
// half of File > Models..., engine/download/model_download.h). Scans are
// header-only and run on the calling (UI) thread; a download runs on a thread
// of its own and reports progress and its end as queued signals.
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

class ModelLibrary : public QObject {
  Q_OBJECT
 public:
  explicit ModelLibrary(QObject* parent = nullptr);
  ~ModelLibrary() override;  // cancels a running download and waits for its thread

  // GLASSBOX_MODELS_DIR, else $XDG_DATA_HOME/glassbox/models, else ~/.local/share/glassbox/models.
  static QString defaultDir();
  static QVector<UiLocalModel> scan(const QString& dir);

  // Starts downloading `spec` (OWNER/NAME[:FILE][@REVISION] or an http(s) URL)
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
