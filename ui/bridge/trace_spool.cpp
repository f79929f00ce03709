#include "trace_spool.h"

#include <QDir>
#include <QFileInfo>
#include <QLockFile>
#include <QSettings>

namespace gbui {

qint64 traceSpoolCapBytes() {
  bool ok = false;
  const qint64 mib = QSettings().value(QStringLiteral("traces/spoolCapMB"), kDefaultSpoolCapMiB).toLongLong(&ok);
  return (ok && mib >= 0 ? mib : kDefaultSpoolCapMiB) * 1024 * 1024;
}

QString spoolLockPath(const QString& spoolPath) { return spoolPath + QStringLiteral(".lock"); }

namespace {

// Whether a running process holds the spool's lock (a stale lock is taken over and dropped).
bool lockedByAnother(const QString& spoolPath) {
  if (!QFileInfo::exists(spoolLockPath(spoolPath))) return false;
  QLockFile lock(spoolLockPath(spoolPath));
  lock.setStaleLockTime(0);  // only a dead owner's lock is stale, never an old live one
  if (!lock.tryLock(0)) return lock.error() == QLockFile::LockFailedError;
  lock.unlock();  // it was stale: now free, and its file removed
  return false;
}

}  // namespace

SpoolPruning pruneTraceSpools(const QString& dir, qint64 capBytes, const QString& ownMarker) {
  SpoolPruning out;
  QDir d(dir);
  // Newest first by modification time; reversed below so the oldest go first.
  const QFileInfoList files =
      d.entryInfoList({QStringLiteral("session-*.jsonl")}, QDir::Files, QDir::Time);
  for (const QFileInfo& f : files) out.bytesBefore += f.size();
  out.bytesAfter = out.bytesBefore;
  for (auto it = files.crbegin(); it != files.crend() && out.bytesAfter > capBytes; ++it) {
    if (it->fileName().contains(ownMarker) || lockedByAnother(it->filePath())) continue;
    if (!QFile::remove(it->filePath())) continue;
    out.removed << it->fileName();
    out.bytesAfter -= it->size();
  }
  return out;
}

}  // namespace gbui
