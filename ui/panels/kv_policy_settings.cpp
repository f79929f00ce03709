#include "kv_policy_settings.h"

#include <QCheckBox>
#include <QComboBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QSpinBox>

namespace gbui {

namespace {
constexpr int kDefaultBudget = 512;
constexpr int kMaxBudget = 1 << 20;
}  // namespace

KvPolicySettings::KvPolicySettings(const SettingsCodec& codec, QWidget* parent)
    : QWidget(parent), codec_(codec), options_(codec.kvPolicies()) {
  auto* form = new QFormLayout(this);
  form->setContentsMargins(0, 0, 0, 0);
  form->setLabelAlignment(Qt::AlignRight);
  policy_ = new QComboBox;
  for (const KvPolicyOption& o : options_) policy_->addItem(o.name, o.name);
  for (int i = 0; i < options_.size(); ++i) policy_->setItemData(i, options_[i].summary, Qt::ToolTipRole);
  policy_->setToolTip(tr("KV eviction for new requests: which cached tokens a request keeps once its cache holds "
                         "more than the budget (full keeps every token). Evicted tokens are struck through in the "
                         "chat; the KV panel's Eviction tab shows what each cache keeps"));
  policy_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  policy_->setMinimumContentsLength(8);
  form->addRow(tr("KV eviction"), policy_);
  auto* numbers = new QHBoxLayout;
  budget_ = new QSpinBox;
  budget_->setRange(0, kMaxBudget);
  budget_->setValue(kDefaultBudget);
  budget_->setPrefix(tr("B = "));
  budget_->setToolTip(tr("Token budget: the most tokens a request's cache holds (global layers)"));
  sinks_ = new QSpinBox;
  sinks_->setRange(-1, kMaxBudget);
  sinks_->setValue(-1);
  sinks_->setPrefix(tr("S = "));
  sinks_->setSpecialValueText(tr("S = default"));
  sinks_->setToolTip(tr("Sinks: the first S tokens are never evicted (default: the policy's, sink 4, else 0)"));
  numbers->addWidget(budget_, 1);
  numbers->addWidget(sinks_, 1);
  form->addRow(tr("KV budget"), numbers);
  shadow_ = new QCheckBox(tr("shadow (KL against the full cache)"));
  shadow_->setToolTip(tr("Also run the request with every token kept, in the same batches, and plot per token the "
                         "KL between the two next-token distributions (KV panel, Eviction tab): what the eviction "
                         "cost. Doubles the work of the request"));
  form->addRow(QString(), shadow_);
  status_ = new QLabel;
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  form->addRow(QString(), status_);

  for (const auto& [widget, name] : std::initializer_list<std::pair<QWidget*, const char*>>{
           {policy_, "kvPolicy"}, {budget_, "kvBudget"}, {sinks_, "kvSinks"}, {shadow_, "kvShadow"},
           {status_, "kvPolicyStatus"}})
    widget->setObjectName(QLatin1String(name));
  connect(policy_, &QComboBox::currentIndexChanged, this, &KvPolicySettings::onChanged);
  for (QSpinBox* s : {budget_, sinks_}) connect(s, &QSpinBox::valueChanged, this, &KvPolicySettings::onChanged);
  connect(shadow_, &QCheckBox::toggled, this, &KvPolicySettings::onChanged);
  onChanged();
}

KvPolicyChoice KvPolicySettings::fields() const {
  KvPolicyChoice c;
  c.policy = policy_->currentData().toString();
  c.budget = budget_->value();
  c.sinks = sinks_->value();
  c.shadow = shadow_->isChecked();
  return c;
}

KvPolicyChoice KvPolicySettings::choice() const { return codec_.checkKvPolicy(fields()); }

QString KvPolicySettings::setChoice(const KvPolicyChoice& choice) {
  const KvPolicyChoice checked = codec_.checkKvPolicy(choice);
  if (!checked.ok()) return checked.error;
  updating_ = true;
  policy_->setCurrentIndex(std::max(0, policy_->findData(checked.policy)));
  // Full clears the numbers in the codec: the boxes keep theirs for the next policy.
  if (checked.active()) {
    budget_->setValue(checked.budget);
    sinks_->setValue(checked.sinks);
    shadow_->setChecked(checked.shadow);
  }
  updating_ = false;
  onChanged();
  return {};
}

QString KvPolicySettings::statusText() const { return status_->text(); }

void KvPolicySettings::onChanged() {
  if (updating_) return;
  const KvPolicyChoice c = choice();
  const bool active = fields().active();
  for (QWidget* w : std::initializer_list<QWidget*>{budget_, sinks_, shadow_}) w->setEnabled(active);
  if (!c.ok()) {
    status_->setText(c.error);
    status_->setStyleSheet(QStringLiteral("color: #c02020"));
  } else {
    status_->setText(active ? tr("new requests: %1").arg(c.resolved) : tr("new requests keep every token"));
    status_->setStyleSheet(QStringLiteral("color: #606060"));
  }
  emit choiceChanged(c);
}

}  // namespace gbui
