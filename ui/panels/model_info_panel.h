// ModelInfoPanel: what was loaded — format, architecture, shapes, parameter
// count, tensor types, KV bytes per token (formula and measured), context,
// device (backend, name, memory) and the file's metadata.
// Threads: UI thread.
#pragma once

#include <QWidget>

class QTreeWidget;

namespace gbui {

class SessionModel;

class ModelInfoPanel : public QWidget {
  Q_OBJECT
 public:
  explicit ModelInfoPanel(SessionModel* model, QWidget* parent = nullptr);
  QTreeWidget* tree() const { return tree_; }

 public slots:
  void refresh();

 private:
  SessionModel* model_;
  QTreeWidget* tree_;
};

}  // namespace gbui
