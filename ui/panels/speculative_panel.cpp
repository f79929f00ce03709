#include "speculative_panel.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include "session/session_model.h"

namespace gbui {
namespace {

QCustomPlot* makeChart(const QString& title, const QString& xLabel, const QString& yLabel) {
  auto* plot = new QCustomPlot;
  plot->setMinimumSize(240, 170);
  plot->plotLayout()->insertRow(0);
  plot->plotLayout()->addElement(0, 0, new QCPTextElement(plot, title, QFont("sans", 9, QFont::Bold)));
  plot->xAxis->setLabel(xLabel);
  plot->yAxis->setLabel(yLabel);
  return plot;
}

QCPBars* makeBars(QCustomPlot* plot, const QColor& color) {
  auto* bars = new QCPBars(plot->xAxis, plot->yAxis);
  bars->setBrush(color);
  bars->setPen(QPen(color.darker(130)));
  bars->setWidth(0.6);
  return bars;
}

// A value printed above a bar.
void label(QCustomPlot* plot, double x, double y, const QString& text) {
  auto* item = new QCPItemText(plot);
  item->setPositionAlignment(Qt::AlignHCenter | Qt::AlignBottom);
  item->position->setType(QCPItemPosition::ptPlotCoords);
  item->position->setCoords(x, y);
  item->setText(text);
  item->setFont(QFont("sans", 7));
  item->setClipToAxisRect(false);
}

}  // namespace

SpeculativePanel::SpeculativePanel(SessionModel* model, QWidget* parent) : QWidget(parent), model_(model) {
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  acceptance_ = makeChart(tr("Acceptance rate by draft position"), tr("draft position"), tr("accepted / drafted"));
  makeBars(acceptance_, QColor(60, 160, 90));
  timing_ = makeChart(tr("Decode time per token"), QString(), tr("ms / token"));
  makeBars(timing_, QColor(40, 100, 190));
  auto labels = QSharedPointer<QCPAxisTickerText>::create();
  labels->addTick(1, tr("plain"));
  labels->addTick(2, tr("speculative"));
  timing_->xAxis->setTicker(labels);
  timing_->xAxis->setRange(0.4, 2.6);
  summary_ = new QLabel;
  summary_->setTextFormat(Qt::RichText);
  summary_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  summary_->setMinimumWidth(360);
  summary_->setWordWrap(true);
  layout->addWidget(acceptance_, 3);
  layout->addWidget(timing_, 2);
  layout->addWidget(summary_, 3);
  connect(model_, &SessionModel::batchApplied, this, &SpeculativePanel::onBatch);
  connect(model_, &SessionModel::cleared, this, &SpeculativePanel::reset);
  reset();
}

void SpeculativePanel::reset() {
  draftedByPos_.clear();
  acceptedByPos_.clear();
  numVerifications_ = 0;
  emitted_ = 0;
  draftMs_ = verifyMs_ = 0.0;
  requests_.clear();
  speculative_.clear();
  refresh();
}

void SpeculativePanel::onBatch(const UiEventBatch& batch) {
  bool changed = false;
  for (const UiEvent& e : *batch) {
    if (const auto* v = std::get_if<UiSpeculative>(&e.body)) {
      const size_t k = static_cast<size_t>(v->drafted.size());
      if (draftedByPos_.size() < k) {
        draftedByPos_.resize(k, 0);
        acceptedByPos_.resize(k, 0);
      }
      for (size_t i = 0; i < k; ++i) {
        ++draftedByPos_[i];
        if (static_cast<int>(i) < v->numAccepted) ++acceptedByPos_[i];
      }
      ++numVerifications_;
      emitted_ += v->numAccepted + 1;
      draftMs_ += v->draftMs;
      verifyMs_ += v->verifyMs;
      speculative_.insert(v->request);
      changed = true;
    } else if (const auto* t = std::get_if<UiToken>(&e.body)) {
      PerRequest& r = requests_[t->request];
      ++r.numTokens;
      if (t->step != r.lastStep) ++r.numForwards;  // one target forward per step
      r.lastStep = t->step;
      // Plain requests' tokens change nothing shown until they finish.
      changed = changed || speculative_.count(t->request) > 0;
    } else if (const auto* f = std::get_if<UiFinished>(&e.body)) {
      PerRequest& r = requests_[f->request];
      r.finished = true;
      r.numGenerated = f->numGenerated;
      r.tpotMs = f->tpotMs;
      changed = true;
    }
  }
  if (changed) refresh();
}

SpeculativePanel::Summary SpeculativePanel::summary() const {
  Summary s;
  s.numVerifications = numVerifications_;
  for (size_t i = 0; i < draftedByPos_.size(); ++i) {
    s.drafted += draftedByPos_[i];
    s.accepted += acceptedByPos_[i];
  }
  s.meanAcceptedLength = numVerifications_ > 0 ? double(emitted_) / double(numVerifications_) : 0.0;
  s.draftMs = draftMs_;
  s.verifyMs = verifyMs_;
  double specTokens = 0, specMs = 0, plainTokens = 0, plainMs = 0;
  for (const auto& [key, r] : requests_) {
    const bool spec = speculative_.count(key) > 0;
    if (spec) {
      s.numSpecTokens += r.numTokens;
      s.numSpecForwards += r.numForwards;
    }
    if (!r.finished || r.numGenerated < 2) continue;
    const double decodeTokens = r.numGenerated - 1;
    (spec ? s.numSpecFinished : s.numPlainFinished) += 1;
    (spec ? specTokens : plainTokens) += decodeTokens;
    (spec ? specMs : plainMs) += r.tpotMs * decodeTokens;
  }
  s.tokensPerForward = s.numSpecForwards > 0 ? double(s.numSpecTokens) / double(s.numSpecForwards) : 0.0;
  if (specMs > 0) s.specTokensPerSec = specTokens * 1000.0 / specMs;
  if (plainMs > 0) s.plainTokensPerSec = plainTokens * 1000.0 / plainMs;
  if (s.specTokensPerSec > 0 && s.plainTokensPerSec > 0) s.speedup = s.specTokensPerSec / s.plainTokensPerSec;
  return s;
}

QVector<double> SpeculativePanel::acceptanceBars() const {
  QVector<double> out;
  const auto* bars = static_cast<QCPBars*>(acceptance_->plottable(0));
  for (auto it = bars->data()->constBegin(); it != bars->data()->constEnd(); ++it) out.push_back(it->value);
  return out;
}

QString SpeculativePanel::summaryText() const {
  const Summary s = summary();
  if (s.numVerifications == 0 && s.numPlainFinished == 0)
    return tr("<i>No speculative verifications yet.</i><br>Choose a drafter under Sampling \u2192 Speculative, "
              "then send a prompt.");
  const double total = s.draftMs + s.verifyMs;
  QString html = QStringLiteral("<table cellspacing='2'>");
  const auto row = [&html](const QString& k, const QString& v) {
    html += QStringLiteral("<tr><td align='right'><b>%1</b></td><td>%2</td></tr>").arg(k, v);
  };
  row(tr("verifications"), QString::number(s.numVerifications));
  row(tr("drafted / accepted"), QStringLiteral("%1 / %2 (%3%)")
                                    .arg(s.drafted)
                                    .arg(s.accepted)
                                    .arg(s.drafted > 0 ? 100.0 * double(s.accepted) / double(s.drafted) : 0.0, 0, 'f', 1));
  row(tr("mean accepted length"), tr("%1 tokens per verification").arg(s.meanAcceptedLength, 0, 'f', 2));
  row(tr("drafting vs verifying"), QStringLiteral("%1 ms vs %2 ms (%3% drafting)")
                                       .arg(s.draftMs, 0, 'f', 1)
                                       .arg(s.verifyMs, 0, 'f', 1)
                                       .arg(total > 0 ? 100.0 * s.draftMs / total : 0.0, 0, 'f', 0));
  row(tr("target forwards / token"),
      s.numSpecTokens > 0 ? QStringLiteral("%1 (%2 forwards for %3 tokens; plain = 1.00)")
                                .arg(double(s.numSpecForwards) / double(s.numSpecTokens), 0, 'f', 2)
                                .arg(s.numSpecForwards)
                                .arg(s.numSpecTokens)
                          : QStringLiteral("\u2013"));
  const auto rate = [](double r, int n) {
    return n > 0 ? QStringLiteral("%1 tok/s (%2 req)").arg(r, 0, 'f', 0).arg(n) : QStringLiteral("\u2013");
  };
  row(tr("decode rate, plain"), rate(s.plainTokensPerSec, s.numPlainFinished));
  row(tr("decode rate, speculative"), rate(s.specTokensPerSec, s.numSpecFinished));
  row(tr("measured speed-up"), s.speedup > 0 ? QStringLiteral("<b>%1\u00d7</b>").arg(s.speedup, 0, 'f', 2)
                                             : tr("needs a finished plain and speculative request"));
  html += QStringLiteral("</table><p style='color:gray; font-size:small'>") +
          tr("Speed-up: decode tokens/s (after the first token) of speculative vs plain requests finished in this "
             "session. Tokens per target forward (%1) is the bound with a free drafter.")
              .arg(s.tokensPerForward, 0, 'f', 2) +
          QStringLiteral("</p><p>") +
          tr("In the chat: <span style='color:#008c3c; text-decoration:underline'>accepted draft</span>, "
             "<span style='color:#d21e1e'>resampled (draft rejected; hover for it)</span>, "
             "<span style='color:#8228c8'>bonus</span>.") +
          QStringLiteral("</p>");
  return html;
}

void SpeculativePanel::refresh() {
  auto* bars = static_cast<QCPBars*>(acceptance_->plottable(0));
  QVector<double> keys, values;
  acceptance_->clearItems();
  for (size_t i = 0; i < draftedByPos_.size(); ++i) {
    const double rate = draftedByPos_[i] > 0 ? double(acceptedByPos_[i]) / double(draftedByPos_[i]) : 0.0;
    keys.push_back(double(i + 1));
    values.push_back(rate);
    label(acceptance_, double(i + 1), rate, QStringLiteral("%1/%2").arg(acceptedByPos_[i]).arg(draftedByPos_[i]));
  }
  bars->setData(keys, values, true);
  acceptance_->xAxis->setRange(0.4, std::max<double>(4.0, double(keys.size())) + 0.6);
  acceptance_->xAxis->ticker()->setTickCount(std::max(2, static_cast<int>(keys.size())));
  acceptance_->yAxis->setRange(0, 1.12);

  const Summary s = summary();
  auto* timeBars = static_cast<QCPBars*>(timing_->plottable(0));
  timing_->clearItems();
  QVector<double> tk, tv;
  if (s.plainTokensPerSec > 0) {
    tk.push_back(1);
    tv.push_back(1000.0 / s.plainTokensPerSec);
  }
  if (s.specTokensPerSec > 0) {
    tk.push_back(2);
    tv.push_back(1000.0 / s.specTokensPerSec);
  }
  timeBars->setData(tk, tv, true);
  double top = 0.0;
  for (int i = 0; i < tk.size(); ++i) {
    top = std::max(top, tv[i]);
    label(timing_, tk[i], tv[i], QStringLiteral("%1 ms").arg(tv[i], 0, 'f', tv[i] < 1 ? 3 : 2));
  }
  timing_->yAxis->setRange(0, top > 0 ? top * 1.2 : 1.0);
  summary_->setText(summaryText());
  acceptance_->replot(QCustomPlot::rpQueuedReplot);
  timing_->replot(QCustomPlot::rpQueuedReplot);
}

}  // namespace gbui
