#include "model_info_panel.h"

#include <QHeaderView>
#include <QLocale>
#include <QTreeWidget>
#include <QVBoxLayout>

#include "session/session_model.h"

namespace gbui {

ModelInfoPanel::ModelInfoPanel(SessionModel* model, QWidget* parent) : QWidget(parent), model_(model) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  tree_ = new QTreeWidget;
  tree_->setObjectName(QStringLiteral("modelInfoTree"));
  tree_->setHeaderLabels({tr("Property"), tr("Value")});
  tree_->setAlternatingRowColors(true);
  tree_->header()->setSectionResizeMode(0, QHeaderView::ResizeToContents);
  layout->addWidget(tree_);
  connect(model_, &SessionModel::modelChanged, this, &ModelInfoPanel::refresh);
  refresh();
}

void ModelInfoPanel::refresh() {
  tree_->clear();
  const UiModelInfo& m = model_->modelInfo();
  if (m.path.isEmpty()) {
    new QTreeWidgetItem(tree_, {tr("No model"), tr("File > Open model, or drop a .gguf / .bin file here")});
    return;
  }
  const QLocale locale;
  auto group = [&](const QString& name) {
    auto* item = new QTreeWidgetItem(tree_, {name});
    item->setExpanded(true);
    QFont f = item->font(0);
    f.setBold(true);
    item->setFont(0, f);
    return item;
  };
  auto* file = group(tr("File"));
  for (const auto& [k, v] : QVector<QPair<QString, QString>>{
           {tr("name"), m.name}, {tr("path"), m.path}, {tr("format"), m.format},
           {tr("architecture"), m.architecture}, {tr("tokenizer"), m.tokenizerKind},
           {tr("parameters"), m.numExperts > 0 ? tr("%1 (%2 active per token: %3 of %4 experts)")
                                                       .arg(locale.toString(m.numParameters),
                                                            locale.toString(m.activeParameters))
                                                       .arg(m.numExpertsUsed)
                                                       .arg(m.numExperts)
                                                 : locale.toString(m.numParameters)},
           {tr("weights"), locale.formattedDataSize(static_cast<qint64>(m.weightBytes))},
           {tr("context length"), QString::number(m.contextLength)},
           {tr("chat template"), m.chatTemplate.isEmpty() ? tr("(none)") : m.chatTemplate.left(80)}})
    new QTreeWidgetItem(file, {k, v});
  auto* shapes = group(tr("Shapes"));
  for (const auto& [k, v] : m.shapes) new QTreeWidgetItem(shapes, {k, v});
  auto* types = group(tr("Tensor types"));
  for (const auto& [k, v] : m.tensorTypes) new QTreeWidgetItem(types, {k, v});
  auto* kv = group(tr("KV cache"));
  const int numRequestBlocks = m.numBlocks - m.numScratchBlocks;  // what requests' tables may take
  const int poolTokens = numRequestBlocks * m.blockSize;
  new QTreeWidgetItem(kv, {tr("types"), tr("K %1, V %2 (Engine > KV cache types)").arg(m.kvTypeK, m.kvTypeV)});
  new QTreeWidgetItem(kv, {tr("bytes/token (formula)"),
                           tr("%1 = %2 layers x (K %3 + V %4), rows of %5 x %6 values")
                               .arg(m.kvBytesPerTokenFormula)
                               .arg(m.kvMainLayers > 0 ? m.kvMainLayers : m.numLayers)
                               .arg(m.kvRowBytesK)
                               .arg(m.kvRowBytesV)
                               .arg(m.numKvHeads)
                               .arg(m.headDim)});
  const quint64 measured = m.kvBytesPerTokenMeasured();
  new QTreeWidgetItem(kv, {tr("bytes/token (measured)"), measured > 0 ? QString::number(measured) : tr("n/a")});
  new QTreeWidgetItem(kv, {tr("pool"), tr("%1 blocks x %2 tokens = %3 tokens").arg(numRequestBlocks).arg(m.blockSize).arg(poolTokens)});
  if (m.kvWindowBlocks > 0)
    new QTreeWidgetItem(kv, {tr("sliding layers"),
                             tr("%1 layers, window %2: %3 bytes/token, only the window, in a pool of %4 blocks (%5)")
                                 .arg(m.kvWindowLayers)
                                 .arg(m.kvWindow)
                                 .arg(m.kvWindowBytesPerToken)
                                 .arg(m.kvWindowBlocks)
                                 .arg(locale.formattedDataSize(static_cast<qint64>(m.kvWindowPoolBytes)))});
  new QTreeWidgetItem(kv, {tr("allocated"), tr("%1 for %2 blocks (%3 self-draft scratch)")
                                                .arg(locale.formattedDataSize(static_cast<qint64>(m.kvPoolBytes)))
                                                .arg(m.numBlocks)
                                                .arg(m.numScratchBlocks)});
  if (m.kvBudgetBytes > 0)
    new QTreeWidgetItem(kv, {tr("budget"), tr("%1 for KV (available memory less weights, work buffers and a margin)")
                                               .arg(locale.formattedDataSize(static_cast<qint64>(m.kvBudgetBytes)))});
  new QTreeWidgetItem(kv, {tr("resident at load"), locale.formattedDataSize(static_cast<qint64>(m.kvResidentBytes))});
  if (!m.kvPlanNote.isEmpty()) new QTreeWidgetItem(kv, {tr("note"), m.kvPlanNote});
  auto* device = group(tr("Device"));
  new QTreeWidgetItem(device, {tr("backend"), m.deviceBackend});
  new QTreeWidgetItem(device, {tr("name"), m.deviceName});
  new QTreeWidgetItem(device, {tr("threads"), QString::number(m.numThreads)});
  if (m.deviceBackend == QLatin1String("cpu"))
    new QTreeWidgetItem(device, {tr("float matmuls"), m.bf16Matmuls ? tr("bf16 (F32/F16 matrices rounded at load; not exact)")
                                                                     : tr("exact (weights as the file stores them)")});
  new QTreeWidgetItem(device, {tr("memory used"), locale.formattedDataSize(static_cast<qint64>(m.deviceMemoryUsed))});
  if (m.deviceMemoryTotal > 0)
    new QTreeWidgetItem(device, {tr("memory total"), locale.formattedDataSize(static_cast<qint64>(m.deviceMemoryTotal))});
  auto* meta = group(tr("Metadata"));
  meta->setExpanded(false);
  for (const auto& [k, v] : m.metadata) new QTreeWidgetItem(meta, {k, v.left(200)});
}

}  // namespace gbui
