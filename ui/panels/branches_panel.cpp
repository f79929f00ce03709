#include "branches_panel.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QTreeWidget>
#include <QVBoxLayout>
#include <map>

#include "session/session_model.h"

namespace gbui {
namespace {
constexpr int kRequestRole = Qt::UserRole + 1;
}

BranchesPanel::BranchesPanel(SessionModel* model, QWidget* parent) : QWidget(parent), model_(model) {
  tree_ = new QTreeWidget;
  tree_->setHeaderLabels({tr("Branch"), tr("Request"), tr("P at fork"), tr("Tokens"), tr("KV shared"), tr("State")});
  tree_->header()->setSectionResizeMode(QHeaderView::ResizeToContents);
  tree_->setToolTip(tr("Each fork is a child of the request it branched from; KV shared = blocks held by both"));
  switch_ = new QPushButton(tr("Switch to"));
  release_ = new QPushButton(tr("Release"));
  release_->setToolTip(tr("Free the branch's KV blocks (it cannot be continued afterwards)"));
  summary_ = new QLabel;
  // Its text grows with the tree; it must not widen the dock (and with it the
  // inspector's tab group, squeezing the window's other docks): it is cut at
  // the dock's edge instead, whole in its tooltip.
  summary_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  tree_->setObjectName(QStringLiteral("branchesTree"));
  switch_->setObjectName(QStringLiteral("branchesSwitch"));
  release_->setObjectName(QStringLiteral("branchesRelease"));
  auto* buttons = new QHBoxLayout;
  buttons->addWidget(switch_);
  buttons->addWidget(release_);
  buttons->addStretch(1);
  buttons->addWidget(summary_);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(tree_, 1);
  layout->addLayout(buttons);
  connect(switch_, &QPushButton::clicked, this, [this] {
    if (RequestKey r = selectedRequest()) emit branchActivated(r);
  });
  connect(release_, &QPushButton::clicked, this, [this] {
    if (RequestKey r = selectedRequest()) emit releaseRequested(r);
  });
  connect(tree_, &QTreeWidget::itemDoubleClicked, this, [this](QTreeWidgetItem* item) {
    emit branchActivated(item->data(0, kRequestRole).toULongLong());
  });
  connect(model_, &SessionModel::batchApplied, this, &BranchesPanel::rebuild);
  connect(model_, &SessionModel::cleared, this, &BranchesPanel::rebuild);
  connect(model_, &SessionModel::restoredChanged, this, &BranchesPanel::rebuild);
}

int BranchesPanel::sharedBlocks(RequestKey request) const {
  const RequestInfo* r = model_->request(request);
  if (!r || !r->parent) return 0;
  const RequestInfo* p = model_->request(*r->parent);
  if (!p) return 0;
  int n = 0;
  for (int b : r->blockTable) n += b >= 0 && p->blockTable.contains(b) ? 1 : 0;
  return n;
}

double BranchesPanel::forkProbability(RequestKey request) const { return model_->forkProbability(request); }

QTreeWidgetItem* BranchesPanel::makeItem(const RequestInfo& r) const {
  auto* item = new QTreeWidgetItem;
  QString head;
  if (!r.parent) head = tr("prompt (%1 tokens)").arg(r.promptIds.size());
  else if (!r.tokens.empty()) head = QStringLiteral("'%1'").arg(r.tokens.text(0).left(24).toString());
  else head = tr("(starting)");
  // A branch with a prompt of its own (an edited message): where it left the parent.
  if (r.parent && r.promptIds.size() > r.forkPosition) head = tr("edit at token %1: %2").arg(r.forkPosition).arg(head);
  head.replace(QLatin1Char('\n'), QStringLiteral("\\n"));
  const double p = forkProbability(r.key);
  QString state = r.finished ? r.finish.reason : tr("running");
  if (r.finished && r.blockTable.isEmpty()) state += isRestoredKey(r.key) ? tr(", saved") : tr(", released");
  item->setText(0, head);
  item->setText(1, isRestoredKey(r.key) ? tr("saved %1").arg(r.key & ~kRestoredKeyBit) : QString::number(r.key));
  item->setText(2, p >= 0 ? QString::number(p, 'f', 3) : QStringLiteral("-"));
  item->setText(3, QString::number(r.tokens.size()));
  item->setText(4, r.parent ? QStringLiteral("%1 / %2").arg(sharedBlocks(r.key)).arg(r.blockTable.size())
                            : QString::number(r.blockTable.size()));
  item->setText(5, state);
  item->setData(0, kRequestRole, QVariant::fromValue<quint64>(r.key));
  return item;
}

// Cheap change detector: rebuild only when requests, their states or their
// block counts changed (not on every streamed token).
QString BranchesPanel::signature() const {
  QString s;
  for (const auto& [key, r] : model_->requests())
    s += QStringLiteral("%1:%2:%3:%4;").arg(key).arg(r.finished).arg(r.blockTable.size()).arg(r.tokens.empty());
  return s;
}

void BranchesPanel::rebuild() {
  const QString sig = signature();
  if (sig == lastSignature_) return;
  lastSignature_ = sig;
  const RequestKey selected = selectedRequest();
  tree_->clear();
  std::map<RequestKey, QTreeWidgetItem*> items;
  int numBranches = 0;
  for (const auto& [key, r] : model_->requests()) {  // ascending ids: parents first
    if (r.internal) continue;  // an inspection's prefill (docs/inside.md), not a branch
    QTreeWidgetItem* item = makeItem(r);
    items[key] = item;
    auto parent = r.parent ? items.find(*r.parent) : items.end();
    if (parent != items.end()) {
      parent->second->addChild(item);
      ++numBranches;
    } else {
      tree_->addTopLevelItem(item);
    }
  }
  tree_->expandAll();
  summary_->setText(tr("%1 requests, %2 branches").arg(items.size()).arg(numBranches));
  summary_->setToolTip(summary_->text());
  if (selected) selectRequest(selected);
}

QTreeWidgetItem* BranchesPanel::itemOf(RequestKey request) const {
  for (QTreeWidgetItemIterator it(tree_); *it; ++it)
    if ((*it)->data(0, kRequestRole).toULongLong() == request) return *it;
  return nullptr;
}

void BranchesPanel::selectRequest(RequestKey request) {
  if (QTreeWidgetItem* item = itemOf(request)) tree_->setCurrentItem(item);
}

RequestKey BranchesPanel::selectedRequest() const {
  const QTreeWidgetItem* item = tree_->currentItem();
  return item ? item->data(0, kRequestRole).toULongLong() : 0;
}

}  // namespace gbui
