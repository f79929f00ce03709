#include "token_inspector_panel.h"

#include <algorithm>
#include <cmath>

#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include "chat/token_view.h"
#include "session/session_model.h"

namespace gbui {
namespace {

QString visible(const QString& text) {
  QString t = text;
  t.replace('\n', QStringLiteral("\\n"));
  t.replace(' ', QStringLiteral("\u2423"));
  return t.isEmpty() ? QStringLiteral("\u00b7") : t;
}

}  // namespace

TokenInspectorPanel::TokenInspectorPanel(SessionModel* model, QWidget* parent) : QWidget(parent), model_(model) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  header_ = new QLabel(tr("Click a generated token to inspect it."));
  header_->setWordWrap(true);
  header_->setTextFormat(Qt::RichText);
  layout->addWidget(header_);
  grammar_ = new QLabel;
  grammar_->setObjectName(QStringLiteral("inspectorGrammar"));
  grammar_->setWordWrap(true);
  grammar_->setTextFormat(Qt::RichText);
  grammar_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  grammar_->setVisible(false);
  layout->addWidget(grammar_);
  auto* split = new QSplitter(Qt::Vertical);
  header_->setObjectName(QStringLiteral("inspectorHeader"));
  plot_ = new QCustomPlot;
  plot_->setObjectName(QStringLiteral("inspectorPlot"));
  plot_->yAxis->setLabel(tr("probability"));
  plot_->yAxis2->setVisible(true);
  plot_->yAxis2->setLabel(tr("cumulative / draw"));
  plot_->yAxis2->setRange(0, 1);
  plot_->legend->setVisible(true);
  plot_->legend->setFont(QFont(font().family(), 8));
  // Legend in its own row under the chart so it never hides bars; two entries
  // per row so no label is cut in a narrow dock.
  plot_->plotLayout()->addElement(1, 0, plot_->legend);
  plot_->legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
  plot_->legend->setWrap(2);
  plot_->legend->setColumnSpacing(12);
  plot_->legend->setBorderPen(Qt::NoPen);
  plot_->plotLayout()->setRowStretchFactor(1, 0.001);
  plot_->setMinimumHeight(220);  // bars, axis labels and the two-row legend
  plot_->xAxis->setTickLabelFont(QFont(font().family(), 7));
  split->addWidget(plot_);
  table_ = new QTableWidget;
  table_->setObjectName(QStringLiteral("inspectorTable"));
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->verticalHeader()->setVisible(false);
  table_->verticalHeader()->setDefaultSectionSize(20);
  split->addWidget(table_);
  split->setStretchFactor(0, 3);  // chart : table = 3 : 2
  split->setStretchFactor(1, 2);
  layout->addWidget(split, 1);
  branch_ = new QPushButton(tr("Branch with the selected candidate"));
  branch_->setObjectName(QStringLiteral("branchFromCandidate"));
  layout->addWidget(branch_);
  connect(branch_, &QPushButton::clicked, this, [this] { branchFromRow(table_->currentRow()); });
  connect(table_, &QTableWidget::cellDoubleClicked, this, [this](int row, int) { branchFromRow(row); });
  connect(model_, &SessionModel::tokenSelected, this, &TokenInspectorPanel::showToken);
  connect(model_, &SessionModel::cleared, this, &TokenInspectorPanel::clearView);
}

void TokenInspectorPanel::clearView() {
  shown_.reset();
  plot_->clearPlottables();
  plot_->clearItems();
  // No candidates: no token labels under the axis, and no columns in the table.
  plot_->xAxis->setTicker(QSharedPointer<QCPAxisTickerText>(new QCPAxisTickerText));
  plot_->legend->clearItems();
  plot_->replot(QCustomPlot::rpQueuedReplot);
  table_->clear();
  table_->setRowCount(0);
  table_->setColumnCount(0);
  header_->setText(tr("Click a generated token to inspect it."));
  grammar_->clear();
  grammar_->setVisible(false);
}

void TokenInspectorPanel::showToken(quint64 request, int index) {
  const std::optional<UiToken> t = model_->token(request, index);
  if (!t) return;
  shown_ = std::make_pair(request, index);
  branch_->setEnabled(!t->remote);
  showHeader(*t, request, index);
  showGrammar(*t);
  plotCandidates(*t);
  fillTable(*t);
}

// The header line: the token, its probabilities, entropy and the chain's stages
// (for a remote engine, what the API reports and what it leaves out).
void TokenInspectorPanel::showHeader(const UiToken& t, quint64 request, int index) {
  if (t.remote) {
    header_->setText(tr("<b>%1</b> (request %2, token %3) &nbsp; p = %4 from the server's logprob, rank %5 of %6 "
                        "alternatives<br><small><i>Not available over the API: token id, logits, sampler stages, "
                        "the final distribution, the random draw, entropy.</i></small>")
                         .arg(visible(t.piece).toHtmlEscaped())
                         .arg(request)
                         .arg(index)
                         .arg(std::isnan(t.probBefore) ? tr("n/a") : QString::number(t.probBefore, 'f', 4))
                         .arg(t.rank < t.top.size() ? QString::number(t.rank) : tr("≥%1").arg(t.top.size()))
                         .arg(t.top.size()));
    return;
  }
  QString stages;
  for (int s = 0; s < t.stages.size(); ++s)
    if (s < t.stageActive.size() && t.stageActive[s])
      stages += s < t.numAfterStage.size() ? QStringLiteral(" %1\u2192%2").arg(t.stages[s]).arg(t.numAfterStage[s])
                                           : QStringLiteral(" ") + t.stages[s];  // counts dropped (detailTrimmed)
  header_->setText(tr("<b>%1</b> (id %2, request %3, token %4) &nbsp; p = %5 (raw %6), rank %7<br>"
                      "entropy %8 \u2192 %9 nats, draw %10%11<br><small>candidates %12:%13</small>")
                       .arg(visible(t.piece).toHtmlEscaped())
                       .arg(t.tokenId)
                       .arg(request)
                       .arg(index)
                       .arg(t.prob, 0, 'f', 4)
                       .arg(t.probBefore, 0, 'f', 4)
                       .arg(t.rank)
                       .arg(t.entropyBefore, 0, 'f', 3)
                       .arg(t.entropyAfter, 0, 'f', 3)
                       .arg(t.draw, 0, 'f', 4)
                       .arg(t.xtcFired ? tr(", XTC fired") : QString())
                       .arg(t.numCandidatesBefore)
                       .arg(stages));
  if (t.detailTrimmed)
    header_->setText(header_->text() +
                     tr("<br><small><i>This token's candidates were dropped from memory: the workbench keeps them for "
                        "the last %1 tokens (setting session/detailedTokens). The session's trace file holds them.</i></small>")
                         .arg(model_->detailWindow()));
}

// Removed candidates: the grammar stage's count before minus after (before is
// the previous stage's count, or every candidate when it runs first); with the
// counts dropped from memory, every candidate minus the allowed tokens.
void TokenInspectorPanel::showGrammar(const UiToken& t) {
  if (!t.grammar) {
    grammar_->clear();
    grammar_->setVisible(false);
    return;
  }
  const UiGrammarInfo& g = *t.grammar;
  const int stage = static_cast<int>(t.stages.indexOf(QStringLiteral("grammar")));
  int before = t.numCandidatesBefore, after = std::min(g.numAllowed, t.numCandidatesBefore);
  if (stage >= 0 && stage < t.numAfterStage.size()) {
    if (stage > 0) before = t.numAfterStage[stage - 1];
    after = t.numAfterStage[stage];
  }
  // Small masses keep two significant digits: "0.0031%" says more than "0.0%".
  const double percent = 100.0 * std::clamp(1.0 - static_cast<double>(g.massAllowed), 0.0, 1.0);
  const QString forced = g.numAllowed == 1
                             ? QStringLiteral(" &nbsp;<b style='color:%1'>%2</b>").arg(TokenView::forcedColor().darker(170).name(), tr("forced"))
                             : QString();
  grammar_->setText(tr("<b>grammar</b>: removed %1 of %2 candidates, %3% of the raw probability mass "
                       "(%4 tokens allowed)%5<br><small>state: <code>%6</code></small>")
                        .arg(std::max(0, before - after))
                        .arg(before)
                        .arg(percent >= 0.1 || percent == 0.0 ? QString::number(percent, 'f', 1) : QString::number(percent, 'g', 2))
                        .arg(g.numAllowed)
                        .arg(forced)
                        .arg(g.state.isEmpty() ? tr("(not recorded)") : g.state.toHtmlEscaped()));
  grammar_->setToolTip(tr("What the format's grammar stage did before this token was drawn. Mass removed: the raw "
                          "softmax probability of the tokens the format forbids (how much the model wanted to leave "
                          "the format). Forced: the format allowed only this token."));
  grammar_->setVisible(true);
}

void TokenInspectorPanel::plotCandidates(const UiToken& t) {
  const int n = static_cast<int>(t.top.size());
  QVector<double> x, before, after, chosen, cumulative;
  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  double cum = 0.0, maxP = 0.0;
  for (int i = 0; i < n; ++i) {
    const UiCandidate& c = t.top[i];
    const double final = c.probAfter.isEmpty() ? c.probBefore : c.probAfter.back();
    x << i;
    before << c.probBefore;
    after << (c.id == t.tokenId ? 0.0 : final);
    chosen << (c.id == t.tokenId ? final : 0.0);
    cum += final;
    cumulative << cum;
    maxP = std::max({maxP, static_cast<double>(c.probBefore), final});
    // Short labels, upright (rotated 90 degrees): 20 of them fit side by side.
    const QString label = visible(c.text);
    ticker->addTick(i, label.size() > 8 ? label.left(7) + QStringLiteral("\u2026") : label);
  }
  plot_->clearPlottables();
  plot_->clearItems();
  auto addBars = [&](const QVector<double>& y, const QColor& color, const QString& name, double offset) {
    auto* bars = new QCPBars(plot_->xAxis, plot_->yAxis);
    QVector<double> xs = x;
    for (double& v : xs) v += offset;
    bars->setData(xs, y, true);
    bars->setWidth(0.38);
    bars->setPen(Qt::NoPen);
    bars->setBrush(color);
    bars->setName(name);
  };
  if (t.remote) {  // the server's probabilities only: no chain to show
    addBars(after, QColor(170, 170, 170), tr("alternatives (server's p)"), 0.0);
    addBars(chosen, QColor(240, 140, 30), tr("chosen token (server's p)"), 0.0);
  } else {
    addBars(before, QColor(170, 170, 170), tr("raw p (before sampling)"), -0.2);
    addBars(after, QColor(70, 120, 200), tr("p after the chain"), 0.2);
    addBars(chosen, QColor(240, 140, 30), tr("chosen token"), 0.2);
  }
  auto* cumGraph = new QCPGraph(plot_->xAxis, plot_->yAxis2);
  cumGraph->setData(x, cumulative, true);
  cumGraph->setLineStyle(QCPGraph::lsStepCenter);
  cumGraph->setPen(QPen(QColor(60, 160, 90), 1.5));
  cumGraph->setName(tr("cumulative p (right axis)"));
  auto* draw = new QCPItemStraightLine(plot_);
  draw->point1->setAxes(plot_->xAxis, plot_->yAxis2);
  draw->point2->setAxes(plot_->xAxis, plot_->yAxis2);
  draw->point1->setCoords(0, t.draw);
  draw->point2->setCoords(1, t.draw);
  draw->setPen(QPen(QColor(200, 40, 40), 1, Qt::DashLine));
  draw->setVisible(!t.remote);  // no draw over the API
  addRemovedLabels(t, maxP);
  plot_->xAxis->setTicker(ticker);
  plot_->xAxis->setTickLabelRotation(90);
  plot_->xAxis->setRange(-0.7, std::max(1, n) - 0.3);
  plot_->yAxis->setRange(0, std::max(0.05, maxP * 1.35));
  plot_->replot(QCustomPlot::rpQueuedReplot);
}

// Over each candidate a sampler stage removed: "\u00d7" and the stage's name.
void TokenInspectorPanel::addRemovedLabels(const UiToken& t, double maxP) {
  const int n = static_cast<int>(t.top.size());
  for (int i = 0; i < n; ++i) {
    const UiCandidate& c = t.top[i];
    if (c.removedByStage < 0 || c.removedByStage >= t.stages.size()) continue;
    auto* label = new QCPItemText(plot_);
    label->position->setCoords(i, c.probBefore + maxP * 0.04);
    label->setText(QStringLiteral("\u00d7") + t.stages[c.removedByStage]);
    label->setRotation(-90);
    label->setPositionAlignment(Qt::AlignLeft | Qt::AlignVCenter);
    label->setFont(QFont(font().family(), 7));
    label->setColor(QColor(180, 50, 50));
  }
}

void TokenInspectorPanel::fillTable(const UiToken& t) {
  const int n = static_cast<int>(t.top.size());
  // Stage columns are headed by the stage's name (the probability after it):
  // compact headers keep more columns in view in a narrow dock.
  QStringList headers = t.remote ? QStringList{tr("token"), tr("p (server)")}
                                  : QStringList{tr("token"), tr("id"), tr("logit"), tr("p raw")};
  for (const QString& s : t.stages) headers << s;
  if (!t.remote) headers << tr("removed by");
  table_->clear();
  table_->setColumnCount(static_cast<int>(headers.size()));
  table_->setHorizontalHeaderLabels(headers);
  table_->setRowCount(n);
  for (int i = 0; i < n; ++i) {
    const UiCandidate& c = t.top[i];
    int col = 0;
    auto set = [&](const QString& text) { table_->setItem(i, col++, new QTableWidgetItem(text)); };
    set(visible(c.text));
    if (t.remote) {
      set(QString::number(c.probBefore, 'g', 6));
      if (c.id == t.tokenId)
        for (int k = 0; k < col; ++k) table_->item(i, k)->setBackground(QColor(255, 220, 170));
      continue;
    }
    set(QString::number(c.id));
    set(QString::number(c.logit, 'f', 3));
    set(QString::number(c.probBefore, 'g', 6));
    for (float p : c.probAfter) set(QString::number(p, 'g', 6));
    set(c.removedByStage >= 0 && c.removedByStage < t.stages.size() ? t.stages[c.removedByStage] : QString());
    if (c.id == t.tokenId)
      for (int k = 0; k < col; ++k) table_->item(i, k)->setBackground(QColor(255, 220, 170));
  }
  for (int s = 0; s < t.stages.size() && !t.remote; ++s)
    table_->horizontalHeaderItem(4 + s)->setToolTip(
        t.stages[s] == QLatin1String("grammar")
            ? tr("probability after the grammar stage (0: the format forbids the token)")
            : tr("probability after the %1 stage").arg(t.stages[s]));
  table_->resizeColumnsToContents();
}

void TokenInspectorPanel::branchFromRow(int row) {
  if (!shown_ || row < 0) return;
  const std::optional<UiToken> t = model_->token(shown_->first, shown_->second);
  if (!t || row >= t->top.size()) return;
  emit branchRequested(shown_->first, shown_->second, t->top[row].id);
}

}  // namespace gbui
