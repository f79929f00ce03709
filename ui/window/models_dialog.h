// File > Models...: the models folder (ui/bridge/model_library.h) as a table
// (file, architecture, weights, context, size, whether it fits this machine),
// with Open, Show folder, Delete; the catalog of well-known models as a second
// table, "Available to download" (name, size, type, architecture, whether it
// fits, whether it is downloaded) with Download; and a download from the hub,
// a URL or a catalog id typed in. A download shows a progress bar (bytes, rate,
// time left) and Cancel; one runs at a time.
// FirstStart mode ("Download a model") is what File > Open model... shows when
// the models folder has no models yet: the catalog first, the folder table only
// once it has a model, and "Browse for a file..." for the file dialog instead.
// Object names for tests.
// Threads: UI thread.
#pragma once

#include <QDialog>
#include <QString>
#include <QVector>

#include "bridge/model_library.h"

class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QTableWidget;
class QWidget;

namespace gbui {

class ModelsDialog : public QDialog {
  Q_OBJECT
 public:
  enum class Mode { Library, FirstStart };
  // dir "": ModelLibrary::defaultDir().
  explicit ModelsDialog(const QString& dir = {}, QWidget* parent = nullptr, Mode mode = Mode::Library);
  QString dir() const { return dir_; }
  Mode mode() const { return mode_; }
  void refresh();
  // The row's model file ("" when none is selected).
  QString selectedPath() const;
  QString status() const;
  ModelLibrary* library() { return library_; }
  const UiCatalog& catalog() const { return catalog_; }

 signals:
  void openRequested(const QString& path);
  // FirstStart: "Browse for a file..." (the dialog has closed itself).
  void browseRequested();

 private:
  void buildFolderSection();
  void buildCatalogSection();
  void buildDownloadRow();
  void refreshCatalog();
  void showCatalogDetails();
  void startDownload(const QString& spec, const QString& what);
  void onProgress(qint64 done, qint64 total, double bytesPerSecond);
  void onFinished(const QString& path, const QString& error);
  void deleteSelected();

  QString dir_;
  Mode mode_;
  ModelLibrary* library_;
  QVector<UiLocalModel> models_;
  UiCatalog catalog_;
  QWidget* folderSection_ = nullptr;
  QTableWidget* table_ = nullptr;
  QTableWidget* catalogTable_ = nullptr;
  QLabel* catalogDetails_ = nullptr;
  QPushButton* catalogDownload_ = nullptr;
  QLineEdit* spec_ = nullptr;
  QPushButton* download_ = nullptr;
  QPushButton* cancel_ = nullptr;
  QPushButton* open_ = nullptr;
  QPushButton* delete_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QLabel* status_ = nullptr;
};

}  // namespace gbui
