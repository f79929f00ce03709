#include "score_view.h"

#include <QComboBox>
#include <QFile>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSplitter>
#include <QTextBrowser>
#include <QUrl>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

namespace gbui {

ScoreView::ScoreView(QWidget* parent) : QWidget(parent) {
  input_ = new QPlainTextEdit;
  input_->setPlaceholderText(tr("Paste or open a text to score"));
  base_ = new QLineEdit;
  base_->setPlaceholderText(tr("Base model (optional, same vocabulary): KL per token"));
  mode_ = new QComboBox;
  mode_->addItems({QStringLiteral("logprob"), QStringLiteral("kl")});
  auto* open = new QPushButton(tr("Open text..."));
  auto* browse = new QPushButton(tr("Base..."));
  auto* run = new QPushButton(tr("Score"));
  heatmap_ = new QTextBrowser;
  heatmap_->setOpenLinks(false);
  summary_ = new QLabel;
  details_ = new QLabel;
  details_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  details_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  details_->setMinimumWidth(220);
  input_->setObjectName(QStringLiteral("scoreInput"));
  base_->setObjectName(QStringLiteral("scoreBase"));
  mode_->setObjectName(QStringLiteral("scoreMode"));
  open->setObjectName(QStringLiteral("scoreOpen"));
  browse->setObjectName(QStringLiteral("scoreBrowseBase"));
  run->setObjectName(QStringLiteral("scoreRun"));
  heatmap_->setObjectName(QStringLiteral("scoreHeatmap"));

  auto* controls = new QHBoxLayout;
  controls->addWidget(open);
  controls->addWidget(base_, 1);
  controls->addWidget(browse);
  controls->addWidget(new QLabel(tr("Colour by")));
  controls->addWidget(mode_);
  controls->addWidget(run);
  auto* bottom = new QSplitter;
  bottom->addWidget(heatmap_);
  bottom->addWidget(details_);
  bottom->setStretchFactor(0, 3);
  auto* split = new QSplitter(Qt::Vertical);
  split->addWidget(input_);
  split->addWidget(bottom);
  split->setStretchFactor(1, 3);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(controls);
  layout->addWidget(split, 1);
  layout->addWidget(summary_);

  connect(run, &QPushButton::clicked, this, &ScoreView::score);
  connect(mode_, &QComboBox::currentTextChanged, this, &ScoreView::render);
  connect(open, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, tr("Open text"), {}, tr("Text (*.txt *.md);;All files (*)"));
    QFile f(path);
    if (!path.isEmpty() && f.open(QIODevice::ReadOnly)) input_->setPlainText(QString::fromUtf8(f.readAll()));
  });
  connect(browse, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, tr("Base model"), {}, tr("Models (*.gguf *.bin)"));
    if (!path.isEmpty()) base_->setText(path);
  });
  connect(heatmap_, &QTextBrowser::anchorClicked, this, [this](const QUrl& url) { showDetails(url.fragment().toInt()); });
}

void ScoreView::setText(const QString& text) { input_->setPlainText(text); }
void ScoreView::setBasePath(const QString& path) { base_->setText(path); }
void ScoreView::setMode(const QString& mode) { mode_->setCurrentText(mode); }
QString ScoreView::summary() const { return summary_->text(); }
QString ScoreView::details() const { return details_->text(); }

void ScoreView::score() {
  summary_->setText(tr("Scoring..."));
  emit scoreRequested(++tag_, input_->toPlainText(), base_->text());
}

void ScoreView::onFinished(quint64 tag, const QString& json) {
  if (tag != tag_) return;
  json_ = json;
  const QJsonObject root = QJsonDocument::fromJson(json.toUtf8()).object();
  tokens_ = root.value(QStringLiteral("tokens")).toArray();
  klMax_ = root.value(QStringLiteral("kl_percentiles")).toObject().value(QStringLiteral("max")).toDouble();
  QString s = tr("%1 tokens scored, perplexity %2")
                  .arg(tokens_.size())
                  .arg(root.value(QStringLiteral("perplexity")).toDouble(), 0, 'f', 3);
  if (root.contains(QStringLiteral("kl_mean")))
    s += tr("; KL mean %1, p99 %2, top-1 agreement %3%")
             .arg(root.value(QStringLiteral("kl_mean")).toDouble(), 0, 'g', 4)
             .arg(root.value(QStringLiteral("kl_percentiles")).toObject().value(QStringLiteral("p99")).toDouble(), 0, 'g', 4)
             .arg(100.0 * root.value(QStringLiteral("top1_agreement")).toDouble(), 0, 'f', 1);
  else if (mode_->currentText() == QLatin1String("kl"))
    mode_->setCurrentText(QStringLiteral("logprob"));
  if (root.contains(QStringLiteral("remote")))
    s += tr(" (scored by %1; not available over the API: token ids, entropy, KL)")
             .arg(root.value(QStringLiteral("remote")).toString());
  summary_->setText(s);
  render();
  emit finished();
}

void ScoreView::onFailed(quint64 tag, const QString& message) {
  if (tag != tag_) return;
  json_.clear();
  tokens_ = {};
  heatmap_->clear();
  summary_->setText(tr("Scoring failed: %1").arg(message));
  emit finished();
}

// logprob: 1 - p (an unlikely token is hot); kl: KL / the text's largest KL.
double ScoreView::heat(int k) const {
  const QJsonObject t = tokens_.at(k).toObject();
  if (mode_->currentText() == QLatin1String("kl"))
    return klMax_ > 0 ? std::clamp(t.value(QStringLiteral("kl")).toDouble() / klMax_, 0.0, 1.0) : 0.0;
  return 1.0 - std::exp(t.value(QStringLiteral("logprob")).toDouble());
}

void ScoreView::render() {
  QString html;
  for (int k = 0; k < tokens_.size(); ++k) {
    const QJsonObject t = tokens_[k].toObject();
    const double h = heat(k);
    const QColor c = QColor::fromHsvF(0.0, std::clamp(h, 0.0, 1.0) * 0.8, 1.0);
    QString text = t.value(QStringLiteral("text")).toString().toHtmlEscaped();
    text.replace(QLatin1Char('\n'), QStringLiteral("<br>"));
    html += QStringLiteral("<a href=\"#%1\" style=\"text-decoration:none;color:black;background:%2\">%3</a>")
                .arg(k)
                .arg(c.name(), text);
  }
  heatmap_->setHtml(html);
}

void ScoreView::showDetails(int k) {
  if (k < 0 || k >= tokens_.size()) return;
  const QJsonObject t = tokens_[k].toObject();
  const QJsonArray ids = QJsonDocument::fromJson(json_.toUtf8()).object().value(QStringLiteral("token_ids")).toArray();
  if (!ids.isEmpty() && t.value(QStringLiteral("id")).isDouble()) {
    QVector<int> sequence;
    for (const QJsonValue& v : ids) sequence.push_back(v.toInt());
    emit tokenPicked(sequence, t.value(QStringLiteral("position")).toInt());
  }
  if (const QJsonObject r = t.value(QStringLiteral("routing")).toObject(); !r.isEmpty()) {
    UiRouting routing;
    routing.perToken = r.value(QStringLiteral("experts_per_token")).toInt();
    for (const QJsonValue& v : r.value(QStringLiteral("experts")).toArray()) routing.experts.push_back(v.toInt());
    for (const QJsonValue& v : r.value(QStringLiteral("weights")).toArray())
      routing.weights.push_back(static_cast<float>(v.toDouble()));
    if (routing.perToken > 0 && routing.experts.size() == routing.weights.size())
      emit routingPicked(tr("Scored token at position %1 \"%2\"")
                             .arg(t.value(QStringLiteral("position")).toInt())
                             .arg(t.value(QStringLiteral("text")).toString().toHtmlEscaped()),
                         routing);
  }
  // A remote score (echo + logprobs) has null where top-N logprobs cannot tell.
  const QString na = tr("not available");
  const QJsonValue id = t.value(QStringLiteral("id")), rank = t.value(QStringLiteral("rank")),
                   entropy = t.value(QStringLiteral("entropy"));
  QString s = tr("<b>%1</b> (id %2, position %3)<br>logprob %4, rank %5, entropy %6")
                  .arg(t.value(QStringLiteral("text")).toString().toHtmlEscaped())
                  .arg(id.isDouble() ? QString::number(id.toInt()) : na)
                  .arg(t.value(QStringLiteral("position")).toInt())
                  .arg(t.value(QStringLiteral("logprob")).toDouble(), 0, 'f', 4)
                  .arg(rank.isDouble() ? QString::number(rank.toInt())
                                       : tr("not among the server's %1 alternatives")
                                             .arg(t.value(QStringLiteral("top")).toArray().size()))
                  .arg(entropy.isDouble() ? QString::number(entropy.toDouble(), 'f', 3) : na);
  if (t.contains(QStringLiteral("kl")))
    s += tr("<br>KL %1, top-1 %2").arg(t.value(QStringLiteral("kl")).toDouble(), 0, 'g', 4)
             .arg(t.value(QStringLiteral("top1_agree")).toBool() ? tr("agrees") : tr("differs"));
  s += QStringLiteral("<br>");
  for (const QJsonValue& v : t.value(QStringLiteral("top")).toArray()) {
    const QJsonObject c = v.toObject();
    s += QStringLiteral("<br>%1 &nbsp; %2")
             .arg(std::exp(c.value(QStringLiteral("logprob")).toDouble()), 0, 'f', 4)
             .arg(c.value(QStringLiteral("text")).toString().toHtmlEscaped());
  }
  details_->setText(s);
}

}  // namespace gbui
