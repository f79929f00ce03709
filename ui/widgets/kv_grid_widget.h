// KvGridWidget: one cell per block of the KV pool, custom painted from the
// SessionModel (so replay draws the same map). Fill colour = owning request,
// filled from the bottom in proportion to the slots used; a dot marks a block
// shared by several requests (refcount > 1); an outline only marks a cached block
// without owner; free blocks are pale; a block a request gave back because it
// left its sliding window is amber and struck through until it is taken again. Hover shows id, refcount, owners and tokens.
// Threads: UI thread.
#pragma once

#include <QWidget>

namespace gbui {

class SessionModel;

class KvGridWidget : public QWidget {
  Q_OBJECT
 public:
  explicit KvGridWidget(SessionModel* model, QWidget* parent = nullptr);
  int numCells() const;
  int blockAt(QPoint pos) const;
  QString tooltipFor(int block) const;
  static QColor requestColor(quint64 request);
  QSize sizeHint() const override { return {360, 200}; }
  bool hasHeightForWidth() const override { return true; }
  int heightForWidth(int width) const override;

 protected:
  void paintEvent(QPaintEvent* event) override;
  bool event(QEvent* event) override;

 private:
  int columns() const;
  QRect cellRect(int block) const;
  SessionModel* model_;
  static constexpr int kCell = 14;  // px, including the gap
};

}  // namespace gbui
