// Besides EngineController's files, the one place in ui/ that includes an engine
// header: the header-only weight summary of a model file.
#include "model_file_summary.h"

#include <QDateTime>
#include <QFileInfo>
#include <QGridLayout>
#include <QHash>
#include <QLabel>
#include <QLineEdit>

#include "model/weight_report.h"

namespace gbui {

namespace {

QString humanBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) { bytes /= 1024.0; ++u; }
  return u == 0 ? QStringLiteral("%1 B").arg(bytes, 0, 'f', 0)
                : QStringLiteral("%1 %2").arg(bytes, 0, 'f', 1).arg(QLatin1String(units[u]));
}

QString computeSummary(const QString& path) {
  auto summary = gb::read_weight_summary(path.toStdString());
  if (!summary) {
    // Engine messages start with the path; the line already names the file.
    QString why = QString::fromStdString(summary.error().message);
    if (why.startsWith(path + QStringLiteral(": "))) why = why.mid(path.size() + 2);
    if (why.size() > 80) why = why.left(77) + QStringLiteral("...");
    return QObject::tr("cannot read: %1").arg(why);
  }
  const gb::WeightSummary& s = summary.value();
  return QStringLiteral("%1, %2").arg(QString::fromStdString(s.label), humanBytes(static_cast<double>(s.num_bytes)));
}

}  // namespace

QString modelFileSummary(const QString& path) {
  struct Entry { qint64 size = -1; QDateTime mtime; QString text; };
  static QHash<QString, Entry> cache;
  const QFileInfo info(path);
  if (!info.exists()) return QObject::tr("cannot read: file not found");
  if (!info.isFile()) return QObject::tr("cannot read: not a file");
  Entry& e = cache[info.absoluteFilePath()];
  if (e.size != info.size() || e.mtime != info.lastModified() || e.text.isEmpty()) {
    e.size = info.size();
    e.mtime = info.lastModified();
    e.text = computeSummary(path);
  }
  return e.text;
}

QString modelFileLine(const QString& path) {
  return QStringLiteral("%1 — %2").arg(QFileInfo(path).fileName(), modelFileSummary(path));
}

ModelFileDialog::ModelFileDialog(QWidget* parent) : QFileDialog(parent, tr("Open model")) {
  setOption(QFileDialog::DontUseNativeDialog, true);  // the preview needs Qt's own layout
  setFileMode(QFileDialog::ExistingFile);
  setNameFilters({tr("Models (*.gguf *.bin)"), tr("All files (*)")});
  preview_ = new QLabel(this);
  preview_->setObjectName(QStringLiteral("modelPreview"));
  preview_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  if (auto* grid = qobject_cast<QGridLayout*>(layout())) grid->addWidget(preview_, grid->rowCount(), 0, 1, -1);
  // Clicking a file moves the current index; typing or selectFile() only sets
  // the name field, so follow both.
  connect(this, &QFileDialog::currentChanged, this, &ModelFileDialog::updatePreview);
  if (auto* name = findChild<QLineEdit*>(QStringLiteral("fileNameEdit")))
    connect(name, &QLineEdit::textChanged, this, [this](const QString& text) {
      updatePreview(QFileInfo(text).isAbsolute() ? text : directory().absoluteFilePath(text));
    });
}

QString ModelFileDialog::previewText() const { return preview_->text(); }

void ModelFileDialog::updatePreview(const QString& path) {
  preview_->setText(QFileInfo(path).isFile() ? modelFileLine(path) : QString());
}

}  // namespace gbui
