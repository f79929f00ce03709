#include "speculative_settings.h"

#include <algorithm>

#include <QComboBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QStackedWidget>


namespace gbui {

SpeculativeSettings::SpeculativeSettings(const SettingsCodec& codec, QWidget* parent) : QWidget(parent), codec_(codec) {
  auto* form = new QFormLayout(this);
  form->setContentsMargins(0, 0, 0, 0);
  form->setLabelAlignment(Qt::AlignRight);
  mode_ = new QComboBox;
  mode_->addItems({tr("Off"), tr("n-gram (prompt lookup)"), tr("Draft model"), tr("Self-draft (first layers)")});
  mode_->setToolTip(tr("Speculative decoding for new requests: a drafter proposes K tokens, the model verifies "
                       "them in one forward pass (greedy output is unchanged)"));
  form->addRow(tr("Speculative"), mode_);
  // One page of drafter-specific controls per mode; K is shared.
  form->addRow(QString(), buildDrafterPages());
  k_ = new QSpinBox;
  k_->setRange(1, 16);
  k_->setValue(4);
  k_->setToolTip(tr("Draft length to start with (adapts within [1, 8] by acceptance)"));
  form->addRow(tr("Draft K"), k_);
  fallback_ = new QComboBox;
  fallback_->addItem(tr("when slower (timing)"), QStringLiteral("timing"));
  fallback_->addItem(tr("on low acceptance (repeatable)"), QStringLiteral("accept"));
  fallback_->addItem(tr("never (always draft)"), QStringLiteral("off"));
  fallback_->setToolTip(tr("When to fall back to plain decoding: when drafting is measured slower than plain "
                           "decoding, when too few drafts are accepted (timing-free, so seeded runs repeat), or never"));
  form->addRow(tr("Fall back"), fallback_);
  error_ = new QLabel;
  error_->setWordWrap(true);
  error_->setStyleSheet(QStringLiteral("color: #c02020"));
  error_->setVisible(false);
  form->addRow(QString(), error_);

  for (const auto& [widget, name] : std::initializer_list<std::pair<QWidget*, const char*>>{
           {mode_, "specMode"}, {ngramN_, "specNgramN"}, {draftPath_, "specDraftPath"}, {selfLayers_, "specSelfLayers"},
           {k_, "specK"}, {fallback_, "specFallback"}})
    widget->setObjectName(QLatin1String(name));
  // Long item texts must not widen the Sampling panel (no sideways scroll there).
  for (QComboBox* box : {mode_, fallback_}) {
    box->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    box->setMinimumContentsLength(12);
  }
  connect(mode_, &QComboBox::currentIndexChanged, this, [this](int i) {
    pages_->setCurrentIndex(i);
    k_->setEnabled(i != 0);
    fallback_->setEnabled(i != 0);
    onChanged();
  });
  connect(draftPath_, &QLineEdit::textChanged, this, &SpeculativeSettings::onChanged);
  for (QSpinBox* s : {ngramN_, selfLayers_, k_}) connect(s, &QSpinBox::valueChanged, this, &SpeculativeSettings::onChanged);
  connect(fallback_, &QComboBox::currentIndexChanged, this, &SpeculativeSettings::onChanged);
  k_->setEnabled(false);
  fallback_->setEnabled(false);
}

namespace {
struct SpinRange {
  int min, max, value;
};

// A drafter page holding one spin box, left-aligned.
QWidget* spinBoxPage(QSpinBox* spin, SpinRange range, const QString& prefix, const QString& toolTip) {
  auto* page = new QWidget;
  auto* row = new QHBoxLayout(page);
  row->setContentsMargins(0, 0, 0, 0);
  spin->setRange(range.min, range.max);
  spin->setValue(range.value);
  spin->setPrefix(prefix);
  spin->setToolTip(toolTip);
  row->addWidget(spin);
  row->addStretch();
  return page;
}
}  // namespace

// The pages of drafter-specific controls, one per mode (Off: an empty page).
QStackedWidget* SpeculativeSettings::buildDrafterPages() {
  pages_ = new QStackedWidget;
  pages_->addWidget(new QWidget);
  ngramN_ = new QSpinBox;
  pages_->addWidget(spinBoxPage(ngramN_, {1, 8, 2}, tr("n = "),
                                tr("Longest suffix matched against the prompt and the text so far")));
  auto* draftPage = new QWidget;
  auto* draftRow = new QHBoxLayout(draftPage);
  draftRow->setContentsMargins(0, 0, 0, 0);
  draftPath_ = new QLineEdit;
  draftPath_->setPlaceholderText(tr("draft model file (same vocabulary)"));
  auto* browseButton = new QPushButton(tr("..."));
  browseButton->setObjectName(QStringLiteral("specBrowse"));
  connect(browseButton, &QPushButton::clicked, this, &SpeculativeSettings::browse);
  browseButton->setFixedWidth(30);
  draftRow->addWidget(draftPath_, 1);
  draftRow->addWidget(browseButton);
  pages_->addWidget(draftPage);
  selfLayers_ = new QSpinBox;
  pages_->addWidget(spinBoxPage(selfLayers_, {1, 256, 3}, tr("layers "),
                                tr("The draft runs the model's first L layers (fewer than the model has)")));
  pages_->setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Maximum);
  return pages_;
}

SpeculativeSettings::Mode SpeculativeSettings::mode() const { return static_cast<Mode>(mode_->currentIndex()); }
void SpeculativeSettings::setMode(Mode mode) { mode_->setCurrentIndex(static_cast<int>(mode)); }
void SpeculativeSettings::setDraftPath(const QString& path) { draftPath_->setText(path); }
void SpeculativeSettings::setK(int k) { k_->setValue(k); }

QString SpeculativeSettings::spec() const {
  const int k = k_->value();
  const QString fallback = fallback_->currentData().toString();
  // The default (timing) is left implicit so plain specs read as they are typed.
  const QString more = fallback == QLatin1String("timing") ? QString() : ",fallback=" + fallback;
  switch (mode()) {
    case Mode::Off: return {};
    case Mode::Ngram: return QStringLiteral("ngram:n=%1,k=%2").arg(ngramN_->value()).arg(k) + more;
    case Mode::DraftModel: return QStringLiteral("draft:%1:k=%2").arg(draftPath_->text().trimmed()).arg(k) + more;
    case Mode::SelfDraft: return QStringLiteral("self:%1:k=%2").arg(selfLayers_->value()).arg(k) + more;
  }
  return {};
}

QString SpeculativeSettings::error() const { return codec_.validateSpeculative(spec()); }

QString SpeculativeSettings::setSpec(const QString& spec) {
  const QString problem = codec_.validateSpeculative(spec);
  if (!problem.isEmpty()) return problem;
  updating_ = true;
  // The parser accepted it; split the text form back into the controls.
  const auto keyValue = [](const QString& options, const QString& key, int fallback) {
    for (const QString& kv : options.split(',', Qt::SkipEmptyParts))
      if (kv.startsWith(key + '=')) return kv.mid(key.size() + 1).toInt();
    return fallback;
  };
  const auto fallbackOf = [](const QString& options) {
    for (const QString& kv : options.split(',', Qt::SkipEmptyParts))
      if (kv.startsWith(QLatin1String("fallback="))) return kv.mid(9);
    return QStringLiteral("timing");
  };
  fallback_->setCurrentIndex(std::max(0, fallback_->findData(fallbackOf(spec.section(':', -1)))));
  if (spec.isEmpty()) {
    setMode(Mode::Off);
  } else if (spec.startsWith(QLatin1String("ngram"))) {
    const QString options = spec.section(':', 1);
    ngramN_->setValue(keyValue(options, "n", 3));
    k_->setValue(keyValue(options, "k", 4));
    setMode(Mode::Ngram);
  } else if (spec.startsWith(QLatin1String("self:"))) {
    selfLayers_->setValue(spec.section(':', 1, 1).toInt());
    k_->setValue(keyValue(spec.section(':', 2), "k", 4));
    setMode(Mode::SelfDraft);
  } else if (spec.startsWith(QLatin1String("draft:"))) {
    QString rest = spec.mid(6);
    const QString last = rest.section(':', -1);
    if (rest.contains(':') && last.contains('=')) {
      k_->setValue(keyValue(last, "k", 4));
      rest = rest.section(':', 0, -2);
    }
    draftPath_->setText(rest);
    setMode(Mode::DraftModel);
  }
  updating_ = false;
  onChanged();
  return {};
}

void SpeculativeSettings::onChanged() {
  if (updating_) return;
  const QString problem = error();
  error_->setText(problem);
  error_->setVisible(!problem.isEmpty());
  emit specChanged(spec());
}

void SpeculativeSettings::browse() {
  const QString path =
      QFileDialog::getOpenFileName(this, tr("Draft model"), draftPath_->text(), tr("Models (*.gguf *.bin);;All files (*)"));
  if (!path.isEmpty()) draftPath_->setText(path);
}

}  // namespace gbui
