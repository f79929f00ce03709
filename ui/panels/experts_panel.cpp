// The Experts panel (see experts_panel.h).
#include "panels/experts_panel.h"

#include <QEvent>
#include <QHelpEvent>
#include <QLabel>
#include <QPainter>
#include <QToolTip>
#include <QVBoxLayout>
#include <algorithm>
#include <variant>

#include "session/session_model.h"

namespace gbui {

ExpertGrid::ExpertGrid(QWidget* parent) : QWidget(parent) {
  setMinimumHeight(40);
  setMouseTracking(true);
}

void ExpertGrid::setGrid(int rows, int columns, QVector<double> values, QString what) {
  rows_ = rows;
  columns_ = columns;
  values_ = std::move(values);
  what_ = std::move(what);
  updateGeometry();
  update();
}

QSize ExpertGrid::sizeHint() const { return {std::max(200, columns_ * 6), std::max(40, rows_ * 6)}; }

QRectF ExpertGrid::cellRect(int row, int column) const {
  const double w = static_cast<double>(width()) / std::max(1, columns_);
  const double h = static_cast<double>(height()) / std::max(1, rows_);
  return {column * w, row * h, w, h};
}

void ExpertGrid::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  for (int r = 0; r < rows_; ++r)
    for (int c = 0; c < columns_; ++c) {
      const double v = std::clamp(value(r, c), 0.0, 1.0);
      if (v <= 0.0) continue;
      // White to dark blue: a weight of 1 (or the largest share) is the darkest.
      p.fillRect(cellRect(r, c), QColor::fromRgbF(1.0 - 0.9 * v, 1.0 - 0.75 * v, 1.0 - 0.3 * v));
    }
  p.setPen(palette().mid().color());
  p.drawRect(rect().adjusted(0, 0, -1, -1));
}

bool ExpertGrid::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip && rows_ > 0 && columns_ > 0) {
    const auto* help = static_cast<QHelpEvent*>(e);
    const int c = std::clamp(static_cast<int>(help->pos().x() * columns_ / std::max(1, width())), 0, columns_ - 1);
    const int r = std::clamp(static_cast<int>(help->pos().y() * rows_ / std::max(1, height())), 0, rows_ - 1);
    QToolTip::showText(help->globalPos(), tr("layer %1, expert %2: %3 %4").arg(r).arg(c).arg(value(r, c), 0, 'f', 3).arg(what_),
                       this);
    return true;
  }
  return QWidget::event(e);
}

ExpertsPanel::ExpertsPanel(SessionModel* model, QWidget* parent) : QWidget(parent), model_(model) {
  auto* layout = new QVBoxLayout(this);
  header_ = new QLabel(this);
  header_->setWordWrap(true);
  token_ = new ExpertGrid(this);
  loadHeader_ = new QLabel(this);
  loadHeader_->setWordWrap(true);
  load_ = new ExpertGrid(this);
  layout->addWidget(header_);
  layout->addWidget(token_, 1);
  layout->addWidget(loadHeader_);
  layout->addWidget(load_, 1);
  connect(model_, &SessionModel::tokenSelected, this, &ExpertsPanel::showToken);
  connect(model_, &SessionModel::batchApplied, this, &ExpertsPanel::count);
  connect(model_, &SessionModel::cleared, this, &ExpertsPanel::reset);
  connect(model_, &SessionModel::modelChanged, this, &ExpertsPanel::reset);
  reset();
}

void ExpertsPanel::reset() {
  const UiModelInfo& info = model_->modelInfo();
  layers_ = info.numExperts > 0 ? info.numLayers : 0;
  experts_ = info.numExperts;
  loadCounts_.fill(0, layers_ * experts_);
  counted_ = 0;
  token_->setGrid(layers_, experts_, QVector<double>(layers_ * experts_, 0.0), tr("weight"));
  token_->setVisible(experts_ > 0);  // a dense model: the line alone
  header_->setText(experts_ > 0 ? tr("%1 experts, %2 per token in each of %3 layers. Click a generated token to see "
                                     "where its step sent it (colour: gate weight).")
                                      .arg(experts_)
                                      .arg(info.numExpertsUsed)
                                      .arg(layers_)
                                : tr("This model is not a mixture of experts: every token uses the whole FFN."));
  showLoad();
}

// Every generated token with routing adds one to each (layer, expert) it used.
void ExpertsPanel::count(const UiEventBatch& batch) {
  if (!batch || experts_ == 0) return;
  bool changed = false;
  for (const UiEvent& e : *batch) {
    const auto* t = std::get_if<UiToken>(&e.body);
    if (t == nullptr || !t->routing || t->routing->numLayers() != layers_) continue;
    // The engine's own requests (an inspection's prefill) are not the conversation's tokens.
    if (const RequestInfo* r = model_->request(t->request); r != nullptr && r->internal) continue;
    for (int i = 0; i < t->routing->experts.size(); ++i) {
      const int expert = t->routing->experts[i];
      if (expert >= 0 && expert < experts_) ++loadCounts_[(i / t->routing->perToken) * experts_ + expert];
    }
    ++counted_;
    changed = true;
  }
  if (changed) showLoad();
}

// Each layer's row: the share of counted tokens routed to each expert, scaled
// by the largest share so the busiest expert is the darkest cell.
void ExpertsPanel::showLoad() {
  QVector<double> share(layers_ * experts_, 0.0);
  double most = 0.0;
  for (int i = 0; i < share.size(); ++i) {
    share[i] = counted_ > 0 ? static_cast<double>(loadCounts_[i]) / counted_ : 0.0;
    most = std::max(most, share[i]);
  }
  load_->setGrid(layers_, experts_, share, tr("of the tokens"));
  load_->setVisible(experts_ > 0);
  loadHeader_->setVisible(experts_ > 0);
  loadHeader_->setText(tr("Expert load over the session: %1 generated tokens; per layer (row), the share routed to "
                          "each expert (the busiest: %2 of the tokens).")
                           .arg(counted_)
                           .arg(most, 0, 'f', 2));
}

void ExpertsPanel::showToken(quint64 request, int index) {
  if (experts_ == 0) return;
  const std::optional<UiToken> t = model_->token(request, index);
  if (!t) return;
  QVector<double> weights(layers_ * experts_, 0.0);
  if (!t->routing || t->routing->numLayers() != layers_) {
    token_->setGrid(layers_, experts_, weights, tr("weight"));
    header_->setText(tr("Token %1 \"%2\": no routing recorded (a token from before the record, or trimmed from "
                        "memory; the trace file keeps it).")
                         .arg(index)
                         .arg(t->piece.toHtmlEscaped()));
    return;
  }
  showRouting(tr("Token %1 \"%2\": the experts of the step that chose it").arg(index).arg(t->piece.toHtmlEscaped()),
              *t->routing);
}

void ExpertsPanel::showRouting(const QString& label, const UiRouting& r) {
  if (experts_ == 0 || r.perToken <= 0 || r.numLayers() != layers_ || r.weights.size() != r.experts.size()) return;
  QVector<double> weights(layers_ * experts_, 0.0);
  QStringList first;
  for (int i = 0; i < r.experts.size(); ++i) {
    const int layer = i / r.perToken, expert = r.experts[i];
    if (expert >= 0 && expert < experts_) weights[layer * experts_ + expert] = r.weights[i];
    if (layer == 0) first << tr("%1 (%2)").arg(expert).arg(r.weights[i], 0, 'f', 2);
  }
  token_->setGrid(layers_, experts_, weights, tr("weight"));
  header_->setText(tr("%1, per layer (row) and expert (column); layer 0: %2.").arg(label, first.join(QStringLiteral(", "))));
}

}  // namespace gbui
