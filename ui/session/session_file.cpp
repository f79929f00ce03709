#include "session_file.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonParseError>

namespace gbui {

namespace {
// writeFileAtomically's temporaries (ui/bridge/atomic_write.h) are PATH.tmp-XXXXXX (mkstemp).
void removeStaleTemporaries(const QString& path) {
  const QFileInfo info(path);
  QDir dir = info.absoluteDir();
  const QStringList stale = dir.entryList({info.fileName() + QStringLiteral(".tmp-??????")}, QDir::Files | QDir::Hidden);
  for (const QString& name : stale) dir.remove(name);
}
}  // namespace

SessionRead readSessionFile(const QString& path) {
  SessionRead out;
  removeStaleTemporaries(path);
  QFile file(path);
  if (!file.exists()) return out;
  if (!file.open(QIODevice::ReadOnly)) {
    out.error = QObject::tr("Session %1 could not be opened: %2").arg(path, file.errorString());
    return out;
  }
  QJsonParseError err;
  const QJsonDocument doc = QJsonDocument::fromJson(file.readAll(), &err);
  file.close();
  if (err.error != QJsonParseError::NoError || !doc.isObject()) {
    const QString kept = path + QStringLiteral(".unreadable");
    QFile::remove(kept);
    QFile::copy(path, kept);
    out.error = QObject::tr("Session %1 is not a saved session (%2 at byte %3); a copy is kept as %4")
                    .arg(path, doc.isNull() ? err.errorString() : QObject::tr("not a JSON object"))
                    .arg(err.offset)
                    .arg(kept);
    return out;
  }
  out.session = doc.object();
  return out;
}

}  // namespace gbui
