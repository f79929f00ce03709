#include "inside_panel.h"

#include <QCheckBox>
#include <QFile>
#include <QFileDialog>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSaveFile>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QTableWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <qcustomplot.h>

#include "inside_attention_view.h"
#include "session/session_model.h"

namespace gbui {
namespace {

QString insideShown(const InsideToken& token) { return QStringLiteral("\u201c%1\u201d").arg(insideTokenLabel(token)); }

// Whole layers on the x axis (steps of 1, 2, 5, ...).
void insideLayerTicks(QCustomPlot* plot) {
  QSharedPointer<QCPAxisTickerFixed> ticker(new QCPAxisTickerFixed);
  ticker->setTickStep(1.0);
  ticker->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
  plot->xAxis->setTicker(ticker);
}

QCustomPlot* insideSmallPlot(const QString& title) {
  auto* plot = new QCustomPlot;
  plot->setMinimumSize(160, 110);
  plot->plotLayout()->insertRow(0);
  auto* label = new QCPTextElement(plot, title);
  plot->plotLayout()->addElement(0, 0, label);
  plot->xAxis->setLabel(QObject::tr("layer"));
  insideLayerTicks(plot);
  plot->addGraph();
  plot->graph(0)->setPen(QPen(QColor(33, 90, 170), 1.5));
  plot->graph(0)->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 4));
  return plot;
}

}  // namespace

InsidePanel::InsidePanel(SessionModel* model, QWidget* parent) : QWidget(parent), model_(model) {
  header_ = new QLabel(tr("Select a token in the chat to look inside the model at it."));
  header_->setObjectName(QStringLiteral("insideHeader"));
  header_->setWordWrap(true);
  header_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  inspect_ = new QPushButton(tr("Inspect"));
  inspect_->setObjectName(QStringLiteral("insideInspect"));
  inspect_->setToolTip(tr("Look inside the model at the selected token"));
  auto_ = new QCheckBox(tr("Auto"));
  auto_->setObjectName(QStringLiteral("insideAuto"));
  auto_->setToolTip(tr("Inspect each selected token while this panel is visible"));
  auto_->setChecked(true);
  layers_ = new QLineEdit;
  layers_->setObjectName(QStringLiteral("insideLayers"));
  layers_->setPlaceholderText(tr("all layers (or a-b)"));
  layers_->setMaximumWidth(120);
  topK_ = new QSpinBox;
  topK_->setObjectName(QStringLiteral("insideTopK"));
  topK_->setRange(1, 100);
  topK_->setValue(5);
  export_ = new QPushButton(tr("Export JSON..."));
  export_->setObjectName(QStringLiteral("insideExport"));
  export_->setEnabled(false);

  attention_ = new InsideAttentionView;
  lensTable_ = new QTableWidget;
  lensTable_->setObjectName(QStringLiteral("insideLensTable"));
  lensTable_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  lensTable_->verticalHeader()->hide();
  lensPlot_ = new QCustomPlot;
  lensPlot_->setObjectName(QStringLiteral("insideLensPlot"));
  lensPlot_->setMinimumHeight(140);
  lensPlot_->xAxis->setLabel(tr("layer"));
  insideLayerTicks(lensPlot_);
  lensPlot_->yAxis->setLabel(tr("target rank + 1"));
  lensPlot_->yAxis->setScaleType(QCPAxis::stLogarithmic);
  lensPlot_->yAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
  lensPlot_->yAxis->setRangeReversed(true);  // rank 1 at the top
  lensPlot_->yAxis2->setVisible(true);
  lensPlot_->yAxis2->setLabel(tr("target probability"));
  lensPlot_->yAxis2->setRange(0.0, 1.0);
  lensPlot_->addGraph(lensPlot_->xAxis, lensPlot_->yAxis);
  lensPlot_->graph(0)->setName(tr("rank"));
  lensPlot_->graph(0)->setPen(QPen(QColor(33, 90, 170), 2));
  lensPlot_->graph(0)->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 5));
  lensPlot_->addGraph(lensPlot_->xAxis, lensPlot_->yAxis2);
  lensPlot_->graph(1)->setName(tr("probability"));
  lensPlot_->graph(1)->setPen(QPen(QColor(214, 96, 20), 2));
  lensPlot_->legend->setVisible(true);
  auto* lens = new QSplitter(Qt::Vertical);
  lens->addWidget(lensTable_);
  lens->addWidget(lensPlot_);

  auto* signalTab = new QWidget;
  auto* grid = new QGridLayout(signalTab);
  const QStringList titles = {tr("residual norm"), tr("attention norm"), tr("MLP norm"), tr("cosine to previous")};
  for (int i = 0; i < titles.size(); ++i) {
    QCustomPlot* plot = insideSmallPlot(titles[i]);
    plot->setObjectName(QStringLiteral("insideSignal%1").arg(i));
    signalPlots_.push_back(plot);
    grid->addWidget(plot, i / 2, i % 2);
  }

  tabs_ = new QTabWidget;
  tabs_->setObjectName(QStringLiteral("insideTabs"));
  tabs_->addTab(attention_, tr("Attention"));
  tabs_->addTab(lens, tr("Logit lens"));
  tabs_->addTab(signalTab, tr("Signals"));

  auto* controls = new QHBoxLayout;
  controls->addWidget(inspect_);
  controls->addWidget(auto_);
  controls->addWidget(new QLabel(tr("Layers")));
  controls->addWidget(layers_);
  controls->addWidget(new QLabel(tr("Top-k")));
  controls->addWidget(topK_);
  controls->addStretch(1);
  controls->addWidget(export_);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(controls);
  layout->addWidget(header_);
  layout->addWidget(tabs_, 1);

  connect(inspect_, &QPushButton::clicked, this, &InsidePanel::inspectSelected);
  connect(export_, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getSaveFileName(this, tr("Export the report"), QStringLiteral("inside.json"),
                                                      tr("JSON (*.json)"));
    if (path.isEmpty()) return;
    if (const QString error = exportJson(path); !error.isEmpty()) header_->setText(error);
  });
  connect(model_, &SessionModel::tokenSelected, this, &InsidePanel::onTokenSelected);
  connect(model_, &SessionModel::cleared, this, [this] {
    selectedTokens_.clear();
    selectedPosition_ = -1;
    selectionInspected_ = true;
  });
}

void InsidePanel::setAuto(bool on) { auto_->setChecked(on); }
void InsidePanel::setLayers(const QString& layers) { layers_->setText(layers); }
void InsidePanel::setTopK(int k) { topK_->setValue(k); }

void InsidePanel::onTokenSelected(quint64 request, int index) {
  const RequestInfo* r = model_->request(request);
  if (!r || index < 0 || index >= static_cast<int>(r->tokens.size())) return;
  // The request's whole sequence, so the lens ranks the token that came next.
  selectRequestSequence(request, r->allTokenIds(), static_cast<int>(r->promptIds.size()) + index);
}

void InsidePanel::onPromptTokenSelected(quint64 request, int position) {
  const RequestInfo* r = model_->request(request);
  if (!r || position < 0 || position >= r->promptIds.size()) return;
  selectRequestSequence(request, r->allTokenIds(), position);
}

void InsidePanel::selectSequence(const QVector<int>& tokens, int position) { selectRequestSequence(0, tokens, position); }

void InsidePanel::selectRequestSequence(quint64 request, const QVector<int>& tokens, int position) {
  selectedRequest_ = request;
  selectedTokens_ = tokens;
  selectedPosition_ = position;
  selectionInspected_ = false;
  if (auto_->isChecked() && isVisible()) inspectSelected();
}

void InsidePanel::showEvent(QShowEvent* event) {
  QWidget::showEvent(event);
  // A token selected while the panel was hidden: inspect it now it shows.
  if (auto_->isChecked() && !selectionInspected_) inspectSelected();
}

bool InsidePanel::inspectSelected() {
  if (selectedPosition_ < 0) {
    header_->setText(tr("Select a token in the chat first."));
    return false;
  }
  selectionInspected_ = true;
  inspect(selectedTokens_, selectedPosition_);
  inspectedRequest_ = selectedRequest_;
  return true;
}

void InsidePanel::inspect(const QVector<int>& tokens, int position) {
  InspectCommand command;
  command.tag = ++tag_;
  command.tokens = tokens;
  command.position = position;
  command.layers = layers_->text().trimmed();
  command.topK = topK_->value();
  inspectedRequest_ = 0;  // a sequence of its own unless inspectSelected() says whose
  waiting_ = true;
  error_.clear();
  header_->setText(tr("Position %1: computing…").arg(position));
  emit inspectRequested(command);
}

void InsidePanel::onFinished(quint64 tag, const QString& json) {
  if (tag != tag_) return;  // an older inspection
  waiting_ = false;
  QString error;
  std::optional<InsideReportView> parsed = parseInsideReport(json.toUtf8(), error);
  if (!parsed) return onFailed(tag, tr("The engine's report could not be read: %1").arg(error));
  json_ = json;
  report_ = std::move(parsed);
  showReport();
  emit reportShown();
}

void InsidePanel::onFailed(quint64 tag, const QString& message) {
  if (tag != tag_) return;
  waiting_ = false;
  error_ = message;
  clearView();
  header_->setText(tr("Inspection failed: %1").arg(message));
  emit reportShown();
}

QString InsidePanel::headerText() const { return header_->text(); }

void InsidePanel::clearView() {
  json_.clear();
  report_.reset();
  attention_->setReport(nullptr);
  lensTable_->setRowCount(0);
  for (int g = 0; g < lensPlot_->graphCount(); ++g) lensPlot_->graph(g)->data()->clear();
  lensPlot_->replot(QCustomPlot::rpQueuedReplot);
  for (QCustomPlot* p : signalPlots_) {
    p->graph(0)->data()->clear();
    p->replot(QCustomPlot::rpQueuedReplot);
  }
  export_->setEnabled(false);
}

void InsidePanel::showReport() {
  showHeader();
  QString note;
  attention_->setEvicted(evictedAtInspection(note));
  if (!note.isEmpty()) header_->setText(header_->text() + QStringLiteral("<br>") + note);
  attention_->setReport(&*report_);
  fillLens();
  plotSignals();
  export_->setEnabled(true);
}

void InsidePanel::showHeader() {
  const InsideReportView& r = *report_;
  QString text = tr("<b>Position %1</b> %2 (id %3) → target %4 (id %5, %6)")
                     .arg(r.position)
                     .arg(insideShown(r.token).toHtmlEscaped())
                     .arg(r.token.id)
                     .arg(insideShown(r.target).toHtmlEscaped())
                     .arg(r.target.id)
                     .arg(r.targetSource == QLatin1String("next") ? tr("the next token") : tr("the model's argmax"));
  text += tr("<br>KV: %1 tokens reused, %2 recomputed (%3/%4) · %5 ms (prefill %6, capture %7, lens %8) · %9, %10 layers, "
             "%11 heads, %12 KV heads")
              .arg(r.reusedTokens)
              .arg(r.recomputedTokens)
              .arg(r.kType, r.vType)
              .arg(r.totalMs, 0, 'f', 1)
              .arg(r.prefillMs, 0, 'f', 1)
              .arg(r.captureMs, 0, 'f', 1)
              .arg(r.lensMs, 0, 'f', 1)
              .arg(r.architecture)
              .arg(r.numLayers)
              .arg(r.numHeads)
              .arg(r.numKvHeads);
  if (!r.lensError.isEmpty()) text += tr("<br>No logit lens: %1").arg(r.lensError.toHtmlEscaped());
  header_->setText(text);
}

QMap<int, QString> InsidePanel::evictedAtInspection(QString& note) const {
  const RequestInfo* r = model_->request(inspectedRequest_);
  const KvEvictionLog* log = model_->evictionLog(inspectedRequest_);
  if (!r || !log || log->policy().isEmpty() || !report_) return {};
  const int p = report_->position;
  const int numPrompt = static_cast<int>(r->promptIds.size());
  // The query at p ran in the step that sampled the token at p + 1; a prompt
  // position: by the step that ended the prompt (its chunks are not in the
  // stream); the last token: the cache as the request left it.
  const int next = p + 1 - numPrompt;
  qint64 step = log->lastStep();
  bool promptEnd = false;
  if (next >= 0 && next < static_cast<int>(r->tokens.size())) {
    step = r->tokens[static_cast<size_t>(next)].step;
  } else if (next < 0 && r->tokens.size() > 0) {
    step = r->tokens[0].step;
    promptEnd = true;
  }
  QMap<int, QString> evicted = log->evictedBy(step, p);
  if (evicted.isEmpty()) {
    note = tr("KV eviction (%1): this request's cache still held every one of the %2 positions before this one %3, "
              "so the attention shown is what it saw.")
               .arg(log->policy().toHtmlEscaped())
               .arg(p)
               .arg(promptEnd ? tr("by the end of the prompt") : tr("when it computed it"));
    return evicted;
  }
  note = tr("KV eviction (%1): this request's cache had let go of %2 of the %3 positions before this one %4; the "
            "inspection recomputes with every token cached, so those positions (struck through in the strip of the "
            "evicting layers) carry weights the request itself never gave them.")
             .arg(log->policy().toHtmlEscaped())
             .arg(evicted.size())
             .arg(p)
             .arg(promptEnd ? tr("by the end of the prompt") : tr("when it computed it"));
  return evicted;
}

void InsidePanel::fillLens() {
  const InsideReportView& r = *report_;
  int k = 0;
  for (const InsideLayerView& l : r.layers) k = std::max(k, static_cast<int>(l.lensTop.size()));
  QStringList labels = {tr("Layer"), tr("Target rank"), tr("Target p")};
  for (int i = 0; i < k; ++i) labels << tr("Top %1").arg(i + 1);
  lensTable_->clear();
  lensTable_->setColumnCount(static_cast<int>(labels.size()));
  lensTable_->setHorizontalHeaderLabels(labels);
  lensTable_->setRowCount(static_cast<int>(r.layers.size()));
  QVector<double> xs, ranks, probs;
  for (int row = 0; row < r.layers.size(); ++row) {
    const InsideLayerView& l = r.layers[row];
    lensTable_->setItem(row, 0, new QTableWidgetItem(QString::number(l.layer)));
    if (!l.hasLens) continue;
    lensTable_->setItem(row, 1, new QTableWidgetItem(QString::number(l.targetRank)));
    lensTable_->setItem(row, 2, new QTableWidgetItem(QString::number(l.targetProb, 'f', 4)));
    for (int i = 0; i < l.lensTop.size(); ++i) {
      const InsideToken& t = l.lensTop[i];
      auto* item = new QTableWidgetItem(QStringLiteral("%1 %2").arg(insideShown(t)).arg(t.prob, 0, 'f', 3));
      if (t.id == r.target.id) item->setBackground(QColor(255, 224, 178));  // the target among the top-k
      lensTable_->setItem(row, 3 + i, item);
    }
    xs << l.layer;
    ranks << l.targetRank + 1.0;
    probs << l.targetProb;
  }
  lensTable_->resizeColumnsToContents();
  lensPlot_->graph(0)->setData(xs, ranks, true);
  lensPlot_->graph(1)->setData(xs, probs, true);
  if (!xs.isEmpty()) {
    lensPlot_->xAxis->setRange(xs.front() - 0.5, xs.back() + 0.5);
    const double maxRank = *std::max_element(ranks.begin(), ranks.end());
    lensPlot_->yAxis->setRange(0.8, std::max(10.0, maxRank * 1.5));
  }
  lensPlot_->replot(QCustomPlot::rpQueuedReplot);
}

void InsidePanel::plotSignals() {
  const InsideReportView& r = *report_;
  for (int i = 0; i < signalPlots_.size(); ++i) {
    QVector<double> xs, ys;
    for (const InsideLayerView& l : r.layers) {
      xs << l.layer;
      ys << (i == 0 ? l.residualNorm : i == 1 ? l.attentionNorm : i == 2 ? l.mlpNorm : l.cosineToPrevious);
    }
    QCustomPlot* p = signalPlots_[i];
    p->graph(0)->setData(xs, ys, true);
    p->rescaleAxes();
    p->yAxis->scaleRange(1.15, p->yAxis->range().center());  // the extreme points off the frame
    if (!xs.isEmpty()) p->xAxis->setRange(xs.front() - 0.5, xs.back() + 0.5);
    p->replot(QCustomPlot::rpQueuedReplot);
  }
}

QString InsidePanel::exportJson(const QString& path) const {
  if (json_.isEmpty()) return tr("No report to export.");
  QSaveFile f(path);
  if (!f.open(QIODevice::WriteOnly)) return tr("Cannot write %1: %2").arg(path, f.errorString());
  f.write(json_.toUtf8());
  if (!f.commit()) return tr("Cannot write %1: %2").arg(path, f.errorString());
  return {};
}

}  // namespace gbui
