// BranchesPanel: the session's branch tree. Every fork (an alternative token
// picked in the inspector, a regeneration, an edited message, a comparison lane) is a child of the
// request it was forked from, backed by copy-on-write KV blocks. Each node shows
// the token the branch starts with, that token's probability at the fork (raw
// model, from the parent's record), how many KV blocks it shares with its parent
// right now, and its state. "Switch" makes a branch the shown one; "Release"
// frees a finished branch's KV blocks (its private blocks go back to the pool,
// visible in the KV map).
//
// A branch with a prompt of its own (an edited earlier message) is labelled
// "edit at token N" (N = the tokens it shares with its parent). Requests
// restored from the session file or a trace's tree are drawn as "saved".
//
// Built only from SessionModel (the event stream), so a replayed trace draws
// the same tree. Threads: UI thread only.
#pragma once

#include <QWidget>

#include "session/ui_events.h"

class QLabel;
class QPushButton;
class QTreeWidget;
class QTreeWidgetItem;

namespace gbui {

class SessionModel;
struct RequestInfo;

class BranchesPanel : public QWidget {
  Q_OBJECT
 public:
  explicit BranchesPanel(SessionModel* model, QWidget* parent = nullptr);

  QTreeWidget* tree() const { return tree_; }
  // The item of `request`, or nullptr.
  QTreeWidgetItem* itemOf(RequestKey request) const;
  // KV blocks `request` shares with its parent (0 for a root).
  int sharedBlocks(RequestKey request) const;
  // Probability of the branch's first token at the fork, raw model; -1 unknown.
  double forkProbability(RequestKey request) const;
  void selectRequest(RequestKey request);
  RequestKey selectedRequest() const;

 public slots:
  void rebuild();

 signals:
  void branchActivated(quint64 request);
  void releaseRequested(quint64 request);

 private:
  QTreeWidgetItem* makeItem(const RequestInfo& r) const;
  QString signature() const;

  SessionModel* model_;
  QTreeWidget* tree_;
  QPushButton* switch_;
  QPushButton* release_;
  QLabel* summary_;
  QString lastSignature_;
};

}  // namespace gbui
