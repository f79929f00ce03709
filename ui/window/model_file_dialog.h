// The open-model dialog: a preview line under Qt's file dialog with the
// current file's summary (ui/bridge/model_file_summary.h).
// GUI thread.
#pragma once

#include <QFileDialog>
#include <QString>

class QLabel;

namespace gbui {

// The open-model dialog: Qt's own (non-native) file dialog with a preview line
// (object name "modelPreview") showing the current file's summary.
class ModelFileDialog : public QFileDialog {
  Q_OBJECT
 public:
  explicit ModelFileDialog(QWidget* parent = nullptr);
  QString previewText() const;

 private:
  void updatePreview(const QString& path);
  QLabel* preview_;
};

}  // namespace gbui
