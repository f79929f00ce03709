#include "sampling_panel.h"

#include <QCheckBox>
#include <QDoubleSpinBox>
#include <QFile>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QJsonDocument>
#include <QLabel>
#include <QListWidget>
#include <QMessageBox>
#include <QPushButton>
#include <QRandomGenerator>
#include <QScrollArea>
#include <QSaveFile>
#include <QSlider>
#include <QSpinBox>
#include <QVBoxLayout>
#include <cmath>

#include "format_box.h"
#include "kv_policy_settings.h"
#include "session/json_number.h"
#include "speculative_settings.h"

namespace gbui {
namespace {

constexpr int kSliderSteps = 1000;

double getPath(const QJsonObject& o, const QString& key) {
  const QStringList parts = key.split('.');
  if (parts.size() == 2) return o.value(parts[0]).toObject().value(parts[1]).toDouble();
  return o.value(key).toDouble();
}

void setPath(QJsonObject& o, const QString& key, const QJsonValue& v) {
  const QStringList parts = key.split('.');
  if (parts.size() == 2) {
    QJsonObject inner = o.value(parts[0]).toObject();
    inner.insert(parts[1], v);
    o.insert(parts[0], inner);
  } else {
    o.insert(key, v);
  }
}

}  // namespace

SamplingPanel::SamplingPanel(const SettingsCodec& codec, QWidget* parent) : QWidget(parent), codec_(codec) {
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(2, 2, 2, 2);
  auto* scroll = new QScrollArea;
  scroll->setObjectName(QStringLiteral("samplingScroll"));
  scroll->setWidgetResizable(true);
  // The rows shrink to the dock's width (sliders first): never a sideways scroll.
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  auto* inner = new QWidget;
  auto* form = new QFormLayout(inner);
  form->setLabelAlignment(Qt::AlignRight);
  addField(form, "temperature", tr("Temperature"), 0, 2, 2);
  addField(form, "top_k", tr("Top-k"), 0, 200, 0);
  addField(form, "top_p", tr("Top-p"), 0.01, 1, 3);
  addField(form, "min_p", tr("Min-p"), 0, 1, 3);
  addField(form, "typical_p", tr("Typical-p"), 0.01, 1, 3);
  addField(form, "repeat_penalty", tr("Repeat penalty"), 0.5, 2, 2);
  addField(form, "presence_penalty", tr("Presence penalty"), -2, 2, 2);
  addField(form, "frequency_penalty", tr("Frequency penalty"), -2, 2, 2);
  addField(form, "penalty_last_n", tr("Penalty window"), -1, 2048, 0);
  addField(form, "dry.multiplier", tr("DRY multiplier"), 0, 2, 2);
  addField(form, "dry.base", tr("DRY base"), 1, 4, 2);
  addField(form, "dry.allowed_length", tr("DRY allowed length"), 1, 20, 0);
  addField(form, "dry.penalty_last_n", tr("DRY window"), -1, 2048, 0);
  addField(form, "xtc.threshold", tr("XTC threshold"), 0, 1, 3);
  addField(form, "xtc.probability", tr("XTC probability"), 0, 1, 3);
  addField(form, "top_n_record", tr("Candidates recorded"), 0, 100, 0);

  auto* seedRow = new QHBoxLayout;
  seed_ = new QSpinBox;
  seed_->setObjectName(QStringLiteral("seed"));
  seed_->setRange(0, 2147483647);
  seed_->setToolTip(tr("The seed of the next request, used as it is (0 is a seed like any other, not \"random\"). "
                       "Regenerate draws a new one and shows it here unless the seed is pinned."));
  pinSeed_ = new QCheckBox(tr("pin"));
  pinSeed_->setObjectName(QStringLiteral("pinSeed"));
  pinSeed_->setToolTip(tr("Pinned: Regenerate keeps this seed (the same settings give the same answer)"));
  seedRow->addWidget(seed_, 1);
  seedRow->addWidget(pinSeed_);
  form->addRow(tr("Seed"), seedRow);
  order_ = new QListWidget;
  order_->setObjectName(QStringLiteral("chainOrder"));
  order_->setDragDropMode(QAbstractItemView::InternalMove);
  order_->setToolTip(tr("Chain order: drag to reorder, untick to leave a stage out"));
  order_->setMaximumHeight(190);
  form->addRow(tr("Chain order"), order_);
  format_ = new FormatBox(codec);
  form->addRow(format_);  // the whole width: the editor needs it
  speculative_ = new SpeculativeSettings(codec);
  form->addRow(speculative_);
  kvPolicy_ = new KvPolicySettings(codec);
  form->addRow(kvPolicy_);
  scroll->setWidget(inner);
  outer->addWidget(scroll);

  auto* buttons = new QHBoxLayout;
  auto* load = new QPushButton(tr("Load..."));
  auto* save = new QPushButton(tr("Save..."));
  auto* reset = new QPushButton(tr("Defaults"));
  load->setObjectName(QStringLiteral("loadPreset"));
  load->setToolTip(tr("Load a sampler preset (JSON)"));
  save->setObjectName(QStringLiteral("savePreset"));
  save->setToolTip(tr("Save these settings as a preset (JSON)"));
  reset->setObjectName(QStringLiteral("samplerDefaults"));
  buttons->addWidget(load);
  buttons->addWidget(save);
  buttons->addWidget(reset);
  outer->addLayout(buttons);
  connect(load, &QPushButton::clicked, this, &SamplingPanel::loadPreset);
  connect(save, &QPushButton::clicked, this, &SamplingPanel::savePreset);
  connect(reset, &QPushButton::clicked, this, &SamplingPanel::resetDefaults);
  connect(seed_, &QSpinBox::valueChanged, this, &SamplingPanel::onChanged);
  connect(pinSeed_, &QCheckBox::toggled, this, &SamplingPanel::onChanged);
  connect(order_, &QListWidget::itemChanged, this, &SamplingPanel::onChanged);
  connect(order_->model(), &QAbstractItemModel::rowsMoved, this, &SamplingPanel::onChanged);
  connect(format_, &FormatBox::formatChanged, this, &SamplingPanel::onChanged);
  resetDefaults();
}

void SamplingPanel::addField(QFormLayout* form, const QString& key, const QString& label, double min, double max,
                            int decimals) {
  Field f{key, min, max, decimals, new QSlider(Qt::Horizontal), new QDoubleSpinBox};
  f.slider->setObjectName(QStringLiteral("slider:") + key);
  f.spin->setObjectName(QStringLiteral("spin:") + key);
  f.slider->setAccessibleName(label);
  f.spin->setAccessibleName(label);
  f.slider->setRange(0, kSliderSteps);
  f.spin->setRange(min, max);
  f.spin->setDecimals(decimals);
  f.spin->setSingleStep(decimals == 0 ? 1.0 : std::pow(10.0, -decimals) * 10);
  f.spin->setMinimumWidth(72);
  f.slider->setMinimumWidth(40);
  auto* row = new QHBoxLayout;
  row->addWidget(f.slider, 1);
  row->addWidget(f.spin);
  form->addRow(label, row);
  QSlider* slider = f.slider;
  QDoubleSpinBox* spin = f.spin;
  connect(slider, &QSlider::valueChanged, this, [=, this](int v) {
    if (updating_) return;
    const double x = min + (max - min) * v / kSliderSteps;
    spin->setValue(decimals == 0 ? std::round(x) : x);
  });
  connect(spin, &QDoubleSpinBox::valueChanged, this, [=, this](double x) {
    const bool was = updating_;
    updating_ = true;
    slider->setValue(static_cast<int>(std::lround((x - min) / (max - min) * kSliderSteps)));
    updating_ = was;
    onChanged();
  });
  fields_.push_back(f);
}

const SamplingPanel::Field* SamplingPanel::field(const QString& key) const {
  for (const Field& f : fields_)
    if (f.key == key) return &f;
  return nullptr;
}

QSlider* SamplingPanel::slider(const QString& key) const {
  const Field* f = field(key);
  return f ? f->slider : nullptr;
}

bool SamplingPanel::setValue(const QString& key, double value) {
  const Field* f = field(key);
  if (!f) return false;
  f->spin->setValue(value);
  return true;
}

double SamplingPanel::value(const QString& key) const {
  const Field* f = field(key);
  return f ? f->spin->value() : 0.0;
}

QString SamplingPanel::settingsJson() const {
  QJsonObject o = base_;
  for (const Field& f : fields_) {
    if (f.decimals == 0) setPath(o, f.key, static_cast<int>(std::lround(f.spin->value())));
    else setPath(o, f.key, f.spin->value());
  }
  o.insert("seed", seed_->value());
  QStringList order;
  for (int i = 0; i < order_->count(); ++i)
    if (order_->item(i)->checkState() == Qt::Checked) order << order_->item(i)->text();
  o.insert("order", order.join(','));
  if (const QJsonObject format = format_->json(); !format.isEmpty()) o.insert("format", format);
  return QString::fromUtf8(QJsonDocument(o).toJson(QJsonDocument::Compact));
}

SamplerChoice SamplingPanel::choice() const { return codec_.parseSampler(settingsJson()); }

SamplerChoice SamplingPanel::submitChoice(bool newSeed) {
  // The new seed is shown (and autosaved) before the request goes out, so what
  // the box says is what the request used.
  if (newSeed && !pinSeed_->isChecked()) {
    // Another seed than the one shown (a draw that repeats it would repeat the answer).
    const int old = seed_->value();
    int seed = old;
    while (seed == old) seed = static_cast<int>(QRandomGenerator::global()->bounded(2147483647));
    seed_->setValue(seed);
  }
  // The format is compiled again now (a check may still be waiting for the
  // typing to pause): its error, if any, is on screen when the engine refuses.
  if (format_->kind() != QLatin1String("none")) format_->checkNow(true);
  return choice();
}

bool SamplingPanel::seedPinned() const { return pinSeed_->isChecked(); }
void SamplingPanel::setSeedPinned(bool pinned) { pinSeed_->setChecked(pinned); }
int SamplingPanel::seed() const { return seed_->value(); }

QString SamplingPanel::setSettingsJson(const QString& json) {
  const SamplerChoice choice = codec_.parseSampler(json);
  if (!choice.ok()) return choice.error;
  const QJsonObject o = QJsonDocument::fromJson(choice.json.toUtf8()).object();
  updating_ = true;
  for (const Field& f : fields_) f.spin->setValue(getPath(o, f.key));
  seed_->setValue(static_cast<int>(jsonWholeNumber(o.value("seed"), seed_->minimum(), seed_->maximum()).value_or(seed_->value())));
  order_->clear();
  const QStringList active = o.value("order").toString().split(',', Qt::SkipEmptyParts);
  const QStringList all = {"penalties", "dry",   "logit_bias", "top_k",      "typical_p",
                           "top_p",     "min_p", "xtc",        "temperature"};
  for (const QString& s : active) order_->addItem(s);
  for (const QString& s : all)
    if (!active.contains(s)) order_->addItem(s);
  for (int i = 0; i < order_->count(); ++i) {
    QListWidgetItem* item = order_->item(i);
    item->setFlags(item->flags() | Qt::ItemIsUserCheckable | Qt::ItemIsDragEnabled);
    item->setCheckState(active.contains(item->text()) ? Qt::Checked : Qt::Unchecked);
  }
  format_->setJson(o.value("format").toObject());
  base_ = o;
  base_.remove("format");
  updating_ = false;
  onChanged();
  return {};
}

void SamplingPanel::onChanged() {
  if (updating_) return;
  emit settingsChanged(settingsJson());
}

void SamplingPanel::resetDefaults() { setSettingsJson(codec_.defaultSamplerJson()); }

void SamplingPanel::savePreset() {
  const QString path = QFileDialog::getSaveFileName(this, tr("Save sampler preset"), {}, tr("JSON (*.json)"));
  if (path.isEmpty()) return;
  QSaveFile file(path);
  const QString text = codec_.samplerJson(codec_.parseSampler(settingsJson()), 2);
  if (!file.open(QIODevice::WriteOnly) || file.write(text.toUtf8()) < 0 || !file.commit())
    QMessageBox::warning(this, tr("Save preset"), tr("%1: %2").arg(path, file.errorString()));
}

void SamplingPanel::loadPreset() {
  const QString path = QFileDialog::getOpenFileName(this, tr("Load sampler preset"), {}, tr("JSON (*.json)"));
  if (path.isEmpty()) return;
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) {
    QMessageBox::warning(this, tr("Load preset"), tr("%1: %2").arg(path, file.errorString()));
    return;
  }
  const QString error = setSettingsJson(QString::fromUtf8(file.readAll()));
  if (!error.isEmpty()) QMessageBox::warning(this, tr("Load preset"), tr("%1: %2").arg(path, error));
}

}  // namespace gbui
