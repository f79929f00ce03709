// The engine half of the model-file summary: the header-only weight summary.
#include "model_file_summary.h"

#include <QDateTime>
#include <QFileInfo>
#include <QHash>

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

}  // namespace gbui
