// One line per model file for the recent-models menu and the open-model dialog:
// "name — Q4_K_M, 4.6 bpw, 6.2 MiB" (weight type mix, bits per weight, weight
// bytes), read from the file's header and tensor infos only (engine's
// read_weight_summary), never the weights. Cached per path + size + mtime so
// menus stay instant. A file that cannot be read gives "name — cannot read: why".
// GUI thread.
#pragma once

#include <QFileDialog>
#include <QString>

class QLabel;

namespace gbui {

// "Q4_K_M, 4.6 bpw, 6.2 MiB", or "cannot read: <reason>".
QString modelFileSummary(const QString& path);
// "<file name> — <modelFileSummary>".
QString modelFileLine(const QString& path);

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
