// File > Models...: the models folder (ui/bridge/model_library.h) as a table
// (file, architecture, weights, context, size, whether it fits this machine),
// with Open, Show folder, Delete, and a download from the hub or a URL with a
// progress bar (bytes, rate, time left) and Cancel. Object names for tests.
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

namespace gbui {

class ModelsDialog : public QDialog {
  Q_OBJECT
 public:
  // dir "": ModelLibrary::defaultDir().
  explicit ModelsDialog(const QString& dir = {}, QWidget* parent = nullptr);
  QString dir() const { return dir_; }
  void refresh();
  // The row's model file ("" when none is selected).
  QString selectedPath() const;
  QString status() const;
  ModelLibrary* library() { return library_; }

 signals:
  void openRequested(const QString& path);

 private:
  void startDownload();
  void onProgress(qint64 done, qint64 total, double bytesPerSecond);
  void onFinished(const QString& path, const QString& error);
  void deleteSelected();

  QString dir_;
  ModelLibrary* library_;
  QVector<UiLocalModel> models_;
  QTableWidget* table_;
  QLineEdit* spec_;
  QPushButton* download_;
  QPushButton* cancel_;
  QPushButton* open_;
  QPushButton* delete_;
  QProgressBar* progress_;
  QLabel* status_;
};

}  // namespace gbui
