#include "serve_panel.h"

#include <QCheckBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QSpinBox>
#include <QTableWidget>
#include <QVBoxLayout>

namespace gbui {

namespace {
enum Column { kRequest, kStatus, kPrompt, kCompletion, kCached, kTtft, kTpot, kNumColumns };
}

ServePanel::ServePanel(QWidget* parent) : QWidget(parent) {
  toggle_ = new QCheckBox(tr("Serve"));
  toggle_->setToolTip(tr("Serve the loaded model over an OpenAI-compatible API (docs/server.md)"));
  host_ = new QLineEdit(QStringLiteral("127.0.0.1"));
  host_->setToolTip(tr("Loopback by default; 0.0.0.0 listens on every interface"));
  port_ = new QSpinBox;
  port_->setRange(0, 65535);
  port_->setValue(8080);
  port_->setToolTip(tr("0 picks a free port"));
  key_ = new QLineEdit;
  key_->setEchoMode(QLineEdit::Password);
  key_->setPlaceholderText(tr("none"));
  status_ = new QLabel(tr("Not serving"));
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  toggle_->setObjectName(QStringLiteral("serveToggle"));
  host_->setObjectName(QStringLiteral("serveHost"));
  port_->setObjectName(QStringLiteral("servePort"));
  key_->setObjectName(QStringLiteral("serveApiKey"));
  status_->setObjectName(QStringLiteral("serveStatus"));

  auto* row = new QHBoxLayout;
  row->addWidget(toggle_);
  row->addWidget(new QLabel(tr("Host")));
  row->addWidget(host_, 1);
  row->addWidget(new QLabel(tr("Port")));
  row->addWidget(port_);
  row->addWidget(new QLabel(tr("API key")));
  row->addWidget(key_, 1);

  table_ = new QTableWidget(0, kNumColumns);
  table_->setHorizontalHeaderLabels({tr("Request"), tr("Status"), tr("Prompt"), tr("Completion"), tr("Cached"),
                                     tr("TTFT ms"), tr("TPOT ms")});
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->verticalHeader()->setVisible(false);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setObjectName(QStringLiteral("serveRequests"));

  auto* layout = new QVBoxLayout(this);
  layout->addLayout(row);
  layout->addWidget(status_);
  layout->addWidget(table_, 1);

  connect(table_, &QTableWidget::itemSelectionChanged, this, [this] {
    const QList<QTableWidgetItem*> items = table_->selectedItems();
    if (!items.isEmpty()) emit requestSelected(requestCell(items.first()->row(), kRequest).toULongLong());
  });
  connect(toggle_, &QCheckBox::toggled, this, [this](bool on) {
    if (on) {
      status_->setText(tr("Starting..."));
      emit startServing(host_->text().trimmed(), port_->value(), key_->text());
    } else if (!address_.isEmpty()) {
      emit stopServing();
    }
  });
}

QString ServePanel::address() const { return address_; }
int ServePanel::numRequestRows() const { return table_->rowCount(); }

QString ServePanel::requestCell(int row, int column) const {
  const QTableWidgetItem* item = table_->item(row, column);
  return item ? item->text() : QString();
}

void ServePanel::setServing(bool on) { toggle_->setChecked(on); }
void ServePanel::setPort(int port) { port_->setValue(port); }

void ServePanel::onServingStarted(const QString& address) {
  address_ = address;
  status_->setText(tr("Serving at %1/v1").arg(address));
  for (QWidget* w : {static_cast<QWidget*>(host_), static_cast<QWidget*>(port_), static_cast<QWidget*>(key_)})
    w->setEnabled(false);
}

void ServePanel::onServingFailed(const QString& message) {
  address_.clear();
  status_->setText(tr("Not serving: %1").arg(message));
  const QSignalBlocker block(toggle_);
  toggle_->setChecked(false);
}

void ServePanel::onServingStopped() {
  address_.clear();
  status_->setText(tr("Not serving"));
  for (QWidget* w : {static_cast<QWidget*>(host_), static_cast<QWidget*>(port_), static_cast<QWidget*>(key_)})
    w->setEnabled(true);
  const QSignalBlocker block(toggle_);
  toggle_->setChecked(false);
}

int ServePanel::rowOf(RequestKey request) {
  auto it = rows_.find(request);
  if (it != rows_.end()) return *it;
  const int row = table_->rowCount();
  table_->insertRow(row);
  rows_.insert(request, row);
  setCell(row, kRequest, QString::number(request));
  return row;
}

void ServePanel::setCell(int row, int column, const QString& text) {
  QTableWidgetItem* item = table_->item(row, column);
  if (!item) table_->setItem(row, column, item = new QTableWidgetItem);
  item->setText(text);
}

void ServePanel::applyEvents(const gbui::UiEventBatch& events) {
  if (!events) return;
  for (const UiEvent& e : *events) {
    if (const auto* s = std::get_if<UiSubmitted>(&e.body)) {
      const int row = rowOf(s->request);
      setCell(row, kStatus, tr("waiting"));
      setCell(row, kPrompt, QString::number(s->promptIds.size()));
    } else if (const auto* a = std::get_if<UiAdmitted>(&e.body)) {
      const int row = rowOf(a->request);
      setCell(row, kStatus, tr("running"));
      setCell(row, kCached, QString::number(a->numCachedTokens));
    } else if (const auto* p = std::get_if<UiPreempted>(&e.body)) {
      setCell(rowOf(p->request), kStatus, tr("preempted"));
    } else if (const auto* f = std::get_if<UiFinished>(&e.body)) {
      const int row = rowOf(f->request);
      setCell(row, kStatus, f->reason);
      setCell(row, kPrompt, QString::number(f->numPromptTokens));
      setCell(row, kCompletion, QString::number(f->numGenerated));
      setCell(row, kCached, QString::number(f->numCachedTokens));
      setCell(row, kTtft, QString::number(f->ttftMs, 'f', 2));
      setCell(row, kTpot, QString::number(f->tpotMs, 'f', 3));
    }
  }
}

}  // namespace gbui
