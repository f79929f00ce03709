#include "compare_view.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFile>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSaveFile>
#include <QScrollArea>
#include <QSpinBox>
#include <QSplitter>
#include <QTableWidget>
#include <QTextBrowser>
#include <QUrl>
#include <QVBoxLayout>
#include <algorithm>

#include "widgets/distribution_bars.h"
#include "session/session_model.h"

namespace gbui {
namespace {

constexpr int kMaxLanes = 6;  // gb::kMaxComparisonLanes (the engine checks it too)

// Presets: (name, sampler JSON). Everything not named keeps the engine default.
const QVector<QPair<QString, QString>>& presets() {
  static const QVector<QPair<QString, QString>> p = {
      {QStringLiteral("greedy"), QStringLiteral(R"({"temperature": 0})")},
      {QStringLiteral("balanced"), QStringLiteral(R"({"temperature": 0.8, "top_k": 40, "top_p": 0.95, "min_p": 0.05})")},
      {QStringLiteral("creative"), QStringLiteral(R"({"temperature": 1.2, "top_k": 0, "top_p": 1, "min_p": 0.1})")},
      {QStringLiteral("pure"), QStringLiteral(R"({"temperature": 1, "top_k": 0, "top_p": 1, "min_p": 0})")},
      {QStringLiteral("xtc"), QStringLiteral(R"({"temperature": 1, "min_p": 0.02, "xtc": {"threshold": 0.1, "probability": 0.5}})")},
      // KV eviction lanes (docs/kv-eviction.md): greedy, so what differs is the cache.
      {QStringLiteral("sink B=256"), QStringLiteral(R"({"temperature": 0, "kv_policy": {"policy": "sink", "budget": 256}})")},
      {QStringLiteral("h2o B=256"), QStringLiteral(R"({"temperature": 0, "kv_policy": {"policy": "h2o", "budget": 256}})")},
      {QStringLiteral("snapkv B=256"),
       QStringLiteral(R"({"temperature": 0, "kv_policy": {"policy": "snapkv", "budget": 256}})")},
  };
  return p;
}

// Background for a token's raw probability: red (unlikely) to green (likely).
QString probColor(float p) {
  const float t = std::clamp(p, 0.0f, 1.0f);
  const int r = static_cast<int>(255 - 120 * t), g = static_cast<int>(180 + 60 * t), b = 180;
  return QStringLiteral("#%1%2%3").arg(r, 2, 16, QLatin1Char('0')).arg(g, 2, 16, QLatin1Char('0')).arg(b, 2, 16, QLatin1Char('0'));
}

QString fmt(const QJsonValue& v, int digits = 3) {
  return v.isNull() || v.isUndefined() ? QStringLiteral("-") : QString::number(v.toDouble(), 'f', digits);
}

}  // namespace

CompareView::CompareView(SessionModel* model, const SettingsCodec& codec, QWidget* parent)
    : QWidget(parent), model_(model), codec_(codec) {
  createControls();
  // The view needs about 1060x610 pixels for its rows, columns, bars and table;
  // in a dock smaller than that (the default layout on a laptop screen) it
  // scrolls instead of making the main window taller than the screen.
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  auto* frame = new QScrollArea;
  frame->setObjectName(QStringLiteral("compareFrame"));
  frame->setFrameShape(QFrame::NoFrame);
  frame->setWidgetResizable(true);
  auto* content = new QWidget;
  frame->setWidget(content);
  outer->addWidget(frame);
  auto* layout = new QVBoxLayout(content);
  layout->addLayout(buildTopRow());
  layout->addLayout(buildViewRow());
  layout->addWidget(buildResults(), 1);
  layout->addWidget(status_);
  connectControls();
  addLane(QStringLiteral("A"), presetJson(QStringLiteral("balanced")));
  addLane(QStringLiteral("B"), presetJson(QStringLiteral("creative")));
}

// The run's settings, the lane presets and the run / release buttons.
void CompareView::createControls() {
  prompt_ = new QLineEdit(QStringLiteral("Once upon a time"));
  useChat_ = new QCheckBox(tr("Current chat"));
  useChat_->setToolTip(tr("Use the chat (up to its last answer), rendered by the model's chat template, as the "
                          "prompt: the lanes are alternative answers to the last message"));
  useChat_->setObjectName(QStringLiteral("compareUseChat"));
  connect(useChat_, &QCheckBox::toggled, prompt_, &QWidget::setDisabled);
  samples_ = new QSpinBox;
  samples_->setRange(1, 32);
  seed_ = new QSpinBox;
  seed_->setRange(0, 1 << 30);
  seed_->setValue(1);
  crn_ = new QCheckBox(tr("Common random numbers"));
  crn_->setChecked(true);
  crn_->setToolTip(tr("Every lane uses the same random draw at each position"));
  maxTokens_ = new QSpinBox;
  maxTokens_->setRange(1, 4096);
  maxTokens_->setValue(48);
  shownSample_ = new QSpinBox;
  shownSample_->setRange(0, 31);
  position_ = new QSpinBox;
  position_->setRange(0, 4095);
  preset_ = new QComboBox;
  preset_->addItem(tr("Add lane..."));
  for (const auto& p : presets()) preset_->addItem(p.first);
  run_ = new QPushButton(tr("Run"));
  release_ = new QPushButton(tr("Release KV"));
  status_ = new QLabel;
  // Names for tests and accessibility tools.
  prompt_->setObjectName(QStringLiteral("comparePrompt"));
  samples_->setObjectName(QStringLiteral("compareSamples"));
  seed_->setObjectName(QStringLiteral("compareSeed"));
  crn_->setObjectName(QStringLiteral("compareCrn"));
  maxTokens_->setObjectName(QStringLiteral("compareMaxTokens"));
  shownSample_->setObjectName(QStringLiteral("compareShownSample"));
  position_->setObjectName(QStringLiteral("comparePosition"));
  preset_->setObjectName(QStringLiteral("comparePreset"));
  run_->setObjectName(QStringLiteral("compareRun"));
  release_->setObjectName(QStringLiteral("compareRelease"));
}

// Prompt, samples, seed, max tokens, common random numbers, presets, run.
QHBoxLayout* CompareView::buildTopRow() {
  auto* top = new QHBoxLayout;
  top->addWidget(new QLabel(tr("Prompt")));
  top->addWidget(prompt_, 1);
  top->addWidget(useChat_);
  for (auto [label, w] : {std::pair<QString, QWidget*>{tr("Samples"), samples_}, {tr("Seed"), seed_},
                          {tr("Max tokens"), maxTokens_}}) {
    top->addWidget(new QLabel(label));
    top->addWidget(w);
  }
  top->addWidget(crn_);
  top->addWidget(preset_);
  top->addWidget(run_);
  top->addWidget(release_);
  return top;
}

// Which sample and position to show, and the export buttons.
QHBoxLayout* CompareView::buildViewRow() {
  auto* exportJson = new QPushButton(tr("JSON..."));
  auto* exportCsv = new QPushButton(tr("CSV..."));
  auto* exportPng = new QPushButton(tr("PNG..."));
  exportJson->setObjectName(QStringLiteral("compareExportJson"));
  exportCsv->setObjectName(QStringLiteral("compareExportCsv"));
  exportPng->setObjectName(QStringLiteral("compareExportPng"));
  auto* view = new QHBoxLayout;
  view->addWidget(new QLabel(tr("Show sample")));
  view->addWidget(shownSample_);
  view->addWidget(new QLabel(tr("Distribution at position")));
  view->addWidget(position_);
  view->addStretch(1);
  view->addWidget(new QLabel(tr("Export")));
  for (QPushButton* b : {exportJson, exportCsv, exportPng}) view->addWidget(b);

  connect(exportJson, &QPushButton::clicked, this, [this] { exportDialog(QStringLiteral("JSON (*.json)"), 0); });
  connect(exportCsv, &QPushButton::clicked, this, [this] { exportDialog(QStringLiteral("CSV (*.csv)"), 1); });
  connect(exportPng, &QPushButton::clicked, this, [this] { exportDialog(QStringLiteral("PNG (*.png)"), 2); });
  return view;
}

// The lanes' columns (scrolling), the distribution bars and the summary table.
QSplitter* CompareView::buildResults() {
  auto* lanesHost = new QWidget;
  lanesLayout_ = new QHBoxLayout(lanesHost);
  lanesLayout_->setContentsMargins(0, 0, 0, 0);
  auto* scroll = new QScrollArea;
  scroll->setObjectName(QStringLiteral("compareLanes"));
  scroll->setWidget(lanesHost);
  scroll->setWidgetResizable(true);
  scroll->setMinimumHeight(260);

  summary_ = new QTableWidget(0, 11);
  summary_->setObjectName(QStringLiteral("compareSummary"));
  summary_->setHorizontalHeaderLabels({tr("Lane"), tr("KV"), tr("Mean logprob"), tr("Mean entropy"), tr("Length"), tr("Distinct-1"),
                                       tr("Distinct-2"), tr("Repetition"), tr("Diverged"), tr("First div."), tr("Tok/s")});
  summary_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  summary_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  bars_ = new DistributionBars;

  auto* split = new QSplitter(Qt::Vertical);
  split->addWidget(scroll);
  split->addWidget(bars_);
  split->addWidget(summary_);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  split->setStretchFactor(2, 1);
  return split;
}

void CompareView::connectControls() {
  connect(run_, &QPushButton::clicked, this, &CompareView::run);
  connect(release_, &QPushButton::clicked, this, [this] {
    emit releaseRequested();
    status_->setText(tr("KV blocks of the comparison released"));
  });
  connect(preset_, &QComboBox::activated, this, [this](int index) {
    if (index > 0) addLane(preset_->itemText(index), presetJson(preset_->itemText(index)));
    preset_->setCurrentIndex(0);
  });
  connect(shownSample_, &QSpinBox::valueChanged, this, &CompareView::refresh);
  connect(position_, &QSpinBox::valueChanged, this, &CompareView::updateBars);
  connect(model_, &SessionModel::batchApplied, this, [this] {
    if (!requests_.isEmpty()) refresh();
  });
  connect(model_, &SessionModel::cleared, this, [this] {
    requests_.clear();
    running_ = false;
  });
}

QStringList CompareView::presetNames() {
  QStringList out;
  for (const auto& p : presets()) out << p.first;
  return out;
}

QString CompareView::presetJson(const QString& name) {
  for (const auto& p : presets())
    if (p.first == name) return p.second;
  return QStringLiteral("{}");
}

}  // namespace gbui

namespace gbui {

void CompareView::addLane(const QString& name, const QString& samplerJson) {
  if (laneCount() >= kMaxLanes) {
    status_->setText(tr("At most %1 lanes").arg(kMaxLanes));
    return;
  }
  Lane l;
  l.box = new QWidget;
  l.name = new QLineEdit(name);
  l.settings = new QPlainTextEdit(samplerJson);
  l.settings->setMaximumHeight(70);
  l.kv = new QLabel;
  l.output = new QTextBrowser;
  l.output->setMinimumWidth(200);
  l.output->setMinimumHeight(120);
  l.output->setOpenLinks(false);
  connect(l.output, &QTextBrowser::anchorClicked, this, [this](const QUrl& url) { setPosition(url.fragment().toInt()); });
  auto* dup = new QPushButton(tr("Duplicate"));
  auto* remove = new QPushButton(tr("Remove"));
  // Lane widgets get a serial number (stable while the lane lives).
  const QString key = QStringLiteral("compareLane") + QString::number(++laneSerial_);
  l.name->setObjectName(key + QStringLiteral("Name"));
  l.settings->setObjectName(key + QStringLiteral("Settings"));
  l.output->setObjectName(key + QStringLiteral("Output"));
  l.kv->setObjectName(key + QStringLiteral("Kv"));
  dup->setObjectName(key + QStringLiteral("Duplicate"));
  remove->setObjectName(key + QStringLiteral("Remove"));
  auto* head = new QHBoxLayout;
  head->addWidget(l.name, 1);
  head->addWidget(dup);
  head->addWidget(remove);
  auto* col = new QVBoxLayout(l.box);
  col->setContentsMargins(2, 2, 2, 2);
  col->addLayout(head);
  col->addWidget(l.settings);
  col->addWidget(l.kv);
  col->addWidget(l.output, 1);
  QWidget* box = l.box;
  QLabel* kv = l.kv;
  QPlainTextEdit* settings = l.settings;
  const auto showPolicy = [this, kv, settings] { showLanePolicy(kv, settings->toPlainText()); };
  connect(l.settings, &QPlainTextEdit::textChanged, this, showPolicy);
  showPolicy();
  connect(dup, &QPushButton::clicked, this, [this, box] { duplicateLane(laneIndexOf(box)); });
  connect(remove, &QPushButton::clicked, this, [this, box] { removeLane(laneIndexOf(box)); });
  lanesLayout_->addWidget(l.box, 1);
  lanes_.push_back(l);
}

// Under the lane's settings: the KV policy its samples run with (the engine's
// resolved spelling), or why the settings are refused.
void CompareView::showLanePolicy(QLabel* label, const QString& json) const {
  const LaneChoice lane = codec_.parseLane(json);
  if (!lane.ok()) {
    label->setText(tr("<span style=\"color:#b00000\">%1</span>").arg(lane.sampler.error.toHtmlEscaped()));
    label->setToolTip(lane.sampler.error);
  } else {
    label->setText(lane.evicts() ? tr("KV: <b>%1</b> (prompt computed again, pruned)").arg(lane.kvPolicy.toHtmlEscaped())
                                 : tr("KV: full (forks the shared prompt)"));
    label->setToolTip(tr("A lane's KV eviction policy: add \"kv_policy\" to its settings, e.g. "
                         "{\"kv_policy\": {\"policy\": \"h2o\", \"budget\": 256}} (docs/kv-eviction.md)"));
  }
}

int CompareView::laneIndexOf(const QWidget* box) const {
  for (size_t i = 0; i < lanes_.size(); ++i)
    if (lanes_[i].box == box) return static_cast<int>(i);
  return -1;
}

void CompareView::removeLane(int lane) {
  if (lane < 0 || lane >= laneCount()) return;
  delete lanes_[static_cast<size_t>(lane)].box;
  lanes_.erase(lanes_.begin() + lane);
}

void CompareView::duplicateLane(int lane) {
  if (lane < 0 || lane >= laneCount()) return;
  addLane(laneName(lane) + tr(" copy"), laneSettings(lane));
  // addLane appends; move the copy right after its source.
  if (laneCount() > lane + 2) {
    Lane copy = lanes_.back();
    lanes_.pop_back();
    lanes_.insert(lanes_.begin() + lane + 1, copy);
    lanesLayout_->removeWidget(copy.box);
    lanesLayout_->insertWidget(lane + 1, copy.box, 1);
  }
  lanes_[static_cast<size_t>(lane + 1)].settings->setFocus();
}

QString CompareView::laneName(int lane) const { return lanes_.at(static_cast<size_t>(lane)).name->text(); }
QString CompareView::laneSettings(int lane) const {
  return lanes_.at(static_cast<size_t>(lane)).settings->toPlainText();
}
void CompareView::setLaneSettings(int lane, const QString& json) {
  lanes_.at(static_cast<size_t>(lane)).settings->setPlainText(json);
}
void CompareView::setPrompt(const QString& prompt) { prompt_->setText(prompt); }
void CompareView::setUseChat(bool useChat) { useChat_->setChecked(useChat); }
bool CompareView::useChat() const { return useChat_->isChecked(); }
void CompareView::setSamples(int samples) { samples_->setValue(samples); }
void CompareView::setSeed(int seed) { seed_->setValue(seed); }
void CompareView::setCrn(bool crn) { crn_->setChecked(crn); }
void CompareView::setMaxTokens(int maxTokens) { maxTokens_->setValue(maxTokens); }
void CompareView::setShownSample(int sample) { shownSample_->setValue(sample); }
void CompareView::setPosition(int position) { position_->setValue(position); }
QString CompareView::status() const { return status_->text(); }

quint64 CompareView::requestOf(int lane, int sample) const {
  const int i = lane * runSamples_ + sample;
  return i >= 0 && i < requests_.size() ? requests_[i] : 0;
}

void CompareView::run() {
  CompareCommand command;
  QStringList names;
  for (int i = 0; i < laneCount(); ++i) {
    names << laneName(i);
    const LaneChoice choice = codec_.parseLane(laneSettings(i));
    if (!choice.ok()) {
      error_ = tr("Lane %1: %2").arg(laneName(i), choice.sampler.error);
      status_->setText(error_);
      return;
    }
    command.lanes.push_back({laneName(i), choice.sampler, choice.kvPolicyJson});
  }
  requests_.clear();
  json_.clear();
  csv_.clear();
  error_.clear();
  summary_->setRowCount(0);
  runSamples_ = samples_->value();
  runLanes_ = laneCount();
  runNames_ = names;
  running_ = true;
  status_->setText(tr("Running..."));
  command.tag = ++tag_;
  command.fromChat = useChat_->isChecked();
  if (!command.fromChat) command.prompt = prompt_->text();
  command.samples = samples_->value();
  command.seed = static_cast<quint64>(seed_->value());
  command.crn = crn_->isChecked();
  command.maxTokens = maxTokens_->value();
  emit runRequested(command);
}

void CompareView::onStarted(quint64 tag, const QVector<quint64>& requests) {
  if (tag != tag_) return;
  requests_ = requests;
  status_->setText(tr("%1 lanes x %2 samples decoding together").arg(runLanes_).arg(runSamples_));
  refresh();
}

void CompareView::onFinished(quint64 tag, const QString& json, const QString& csv) {
  if (tag != tag_) return;
  running_ = false;
  json_ = json;
  csv_ = csv;
  const QJsonObject root = QJsonDocument::fromJson(json.toUtf8()).object();
  if (root.contains(QStringLiteral("remote"))) {
    QStringList missing;
    for (const QJsonValue& v : root.value(QStringLiteral("not_available")).toArray()) missing << v.toString();
    status_->setText(tr("Done in %1 ms on %2; not available over the API: %3")
                         .arg(root.value(QStringLiteral("wall_ms")).toDouble(), 0, 'f', 1)
                         .arg(root.value(QStringLiteral("remote")).toString(), missing.join(QStringLiteral(", "))));
  } else {
    status_->setText(tr("Done in %1 ms; %2 prompt KV blocks shared by every forked sample")
                         .arg(root.value(QStringLiteral("wall_ms")).toDouble(), 0, 'f', 1)
                         .arg(root.value(QStringLiteral("kv")).toObject().value(QStringLiteral("num_prompt_blocks_shared")).toInt()));
  }
  fillSummary();
  // Start the bars where the lanes first part ways (sample 0), the interesting place.
  int first = -1;
  for (const QJsonValue& lane : root.value(QStringLiteral("lanes")).toArray()) {
    const QJsonValue d = lane.toObject().value(QStringLiteral("samples")).toArray().at(0).toObject().value(
        QStringLiteral("first_divergence"));
    if (d.isDouble() && (first < 0 || d.toInt() < first)) first = d.toInt();
  }
  if (first >= 0) position_->setValue(first);
  refresh();
  emit finished();
}

void CompareView::onFailed(quint64 tag, const QString& message) {
  if (tag != tag_) return;
  running_ = false;
  error_ = message;
  status_->setText(tr("Comparison failed: %1").arg(message));
  emit finished();
}

const TokenList* CompareView::tokensOf(int lane) const {
  const RequestInfo* r = model_->request(requestOf(lane, std::min(shownSample_->value(), runSamples_ - 1)));
  return r ? &r->tokens : nullptr;
}

QString CompareView::columnText(int lane) const {
  return lane >= 0 && lane < laneCount() ? lanes_[static_cast<size_t>(lane)].output->toPlainText() : QString();
}

void CompareView::refresh() {
  renderColumns();
  updateBars();
}

// Each lane's shown sample, coloured by the raw probability of each token; the
// first token that differs from lane A is underlined red (in lane A too).
void CompareView::renderColumns() {
  const int n = std::min(runLanes_, laneCount());
  const TokenList* base = tokensOf(0);
  QVector<int> divergence(n, -1);
  for (int i = 1; i < n && base; ++i) {
    const TokenList* t = tokensOf(i);
    if (!t) continue;
    const size_t m = std::min(t->size(), base->size());
    size_t k = 0;
    while (k < m && t->tokenId(k) == base->tokenId(k)) ++k;
    if (k < std::max(t->size(), base->size())) divergence[i] = static_cast<int>(k);
  }
  const int shown = std::min(shownSample_->value(), runSamples_ - 1);
  for (int i = 0; i < n; ++i) {
    const TokenList* t = tokensOf(i);
    const quint64 request = requestOf(i, shown);
    const bool evicting = model_->evictionLog(request) != nullptr;
    QString html;
    for (size_t k = 0; t && k < t->size(); ++k) {
      const UiToken tok = (*t)[k];
      const bool mark = (i > 0 && divergence[i] == static_cast<int>(k)) || (i == 0 && divergence.contains(static_cast<int>(k)));
      // A lane with a KV policy: answer tokens its cache no longer holds are
      // struck through, as in the chat, with when and why on hover.
      const bool evicted = evicting && model_->tokenEviction(request, static_cast<int>(k)).evicted();
      QString style = mark ? QStringLiteral("text-decoration:underline;color:#c00000;font-weight:bold") : QString();
      if (evicted) style += QStringLiteral(";text-decoration:line-through;color:#707070");
      QString title = QStringLiteral("p=%1").arg(static_cast<double>(tok.probBefore), 0, 'f', 3);
      if (evicted) title += QStringLiteral("; ") + model_->tokenEvictionText(request, static_cast<int>(k)).toHtmlEscaped();
      // A link per token: clicking it shows the distributions at that position.
      html += QStringLiteral("<a href=\"#%1\" style=\"text-decoration:none;color:black\">").arg(k) +
              QStringLiteral("<span style=\"background:%1;%2\" title=\"%3\">").arg(probColor(tok.probBefore), style, title) +
              tok.text.toHtmlEscaped().replace(QLatin1Char('\n'), QStringLiteral("<br>")) + QStringLiteral("</span></a>");
    }
    lanes_[static_cast<size_t>(i)].output->setHtml(html);
  }
}

void CompareView::updateBars() {
  QVector<LaneDistribution> out;
  const int pos = position_->value();
  for (int i = 0; i < std::min(runLanes_, laneCount()) && !requests_.isEmpty(); ++i) {
    LaneDistribution d;
    d.lane = runNames_.value(i);
    const TokenList* t = tokensOf(i);
    if (t && pos < static_cast<int>(t->size())) {
      const UiToken tok = (*t)[static_cast<size_t>(pos)];
      d.present = true;
      d.drawnText = tok.text;
      std::vector<std::pair<float, const UiCandidate*>> cands;
      for (const UiCandidate& c : tok.top)
        cands.emplace_back(c.removedByStage >= 0 || c.probAfter.isEmpty() ? 0.0f : c.probAfter.back(), &c);
      std::stable_sort(cands.begin(), cands.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
      for (const auto& [p, c] : cands) {
        if (c->id == tok.tokenId) d.drawn = static_cast<int>(d.texts.size());
        d.texts << c->text;
        d.probs << p;
      }
    }
    out << d;
  }
  bars_->setDistributions(out, pos);
}

void CompareView::fillSummary() {
  const QJsonArray lanes = QJsonDocument::fromJson(json_.toUtf8()).object().value(QStringLiteral("lanes")).toArray();
  summary_->setRowCount(static_cast<int>(lanes.size()));
  for (int i = 0; i < lanes.size(); ++i) {
    const QJsonObject l = lanes[i].toObject();
    const QJsonObject s = l.value(QStringLiteral("summary")).toObject();
    const QJsonValue policy = l.value(QStringLiteral("kv_policy"));
    const QJsonObject p = policy.toObject();
    const QString kv = policy.isObject() ? QStringLiteral("%1 B=%2").arg(p.value(QStringLiteral("policy")).toString())
                                               .arg(p.value(QStringLiteral("budget")).toInt())
                                         : policy.toString(QStringLiteral("full"));
    const QStringList cells = {l.value(QStringLiteral("name")).toString(),
                               kv,
                               fmt(s.value(QStringLiteral("mean_logprob"))),
                               fmt(s.value(QStringLiteral("mean_entropy"))),
                               fmt(s.value(QStringLiteral("mean_length")), 1),
                               fmt(s.value(QStringLiteral("distinct_1"))),
                               fmt(s.value(QStringLiteral("distinct_2"))),
                               fmt(s.value(QStringLiteral("repetition_rate"))),
                               QStringLiteral("%1/%2").arg(s.value(QStringLiteral("num_diverged")).toInt()).arg(runSamples_),
                               fmt(s.value(QStringLiteral("mean_first_divergence")), 1),
                               fmt(s.value(QStringLiteral("tokens_per_s")), 0)};
    for (int c = 0; c < cells.size(); ++c) summary_->setItem(i, c, new QTableWidgetItem(cells[c]));
  }
}

QString CompareView::saveText(const QString& path, const QString& text) const {
  if (text.isEmpty()) return tr("Nothing to export: run a comparison first.");
  QSaveFile f(path);
  if (!f.open(QIODevice::WriteOnly)) return tr("Cannot write %1: %2").arg(path, f.errorString());
  f.write(text.toUtf8());
  return f.commit() ? QString() : tr("Cannot write %1: %2").arg(path, f.errorString());
}

QString CompareView::exportJson(const QString& path) const { return saveText(path, json_); }
QString CompareView::exportCsv(const QString& path) const { return saveText(path, csv_); }
QString CompareView::exportPng(const QString& path) {
  return grab().save(path, "PNG") ? QString() : tr("Cannot write %1").arg(path);
}

void CompareView::exportDialog(const QString& filter, int kind) {
  const QString path = QFileDialog::getSaveFileName(this, tr("Export comparison"), {}, filter);
  if (path.isEmpty()) return;
  const QString err = kind == 0 ? exportJson(path) : kind == 1 ? exportCsv(path) : exportPng(path);
  status_->setText(err.isEmpty() ? tr("Saved %1").arg(path) : err);
}

}  // namespace gbui
