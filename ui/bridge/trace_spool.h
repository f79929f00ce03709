// The trace spool folder's size cap. Every workbench session appends its trace
// to a spool file (session-*.jsonl, EngineController); the folder is pruned to a
// total size cap, oldest files first, when a session starts. A spool that is
// being written is never removed: this process's own, and any whose lock file
// (spool path + ".lock", held while writing) a running process holds; a lock
// left by a process that died is stale and does not protect its file.
// The cap is the setting "traces/spoolCapMB" (MiB, default 256; 0 removes every
// finished spool). Threads: any; the folder is shared by processes.
#pragma once

#include <QString>
#include <QStringList>

namespace gbui {

inline constexpr qint64 kDefaultSpoolCapMiB = 256;

// The cap from QSettings ("traces/spoolCapMB"), in bytes; negative or unreadable
// values give the default.
qint64 traceSpoolCapBytes();

QString spoolLockPath(const QString& spoolPath);

struct SpoolPruning {
  QStringList removed;     // file names, oldest first
  qint64 bytesBefore = 0;  // all spools in the folder
  qint64 bytesAfter = 0;
};

// Removes the oldest spools of `dir` until their total is at most capBytes,
// skipping the ones in use (see above). `ownMarker` ("-PID-") names this
// process's spools.
SpoolPruning pruneTraceSpools(const QString& dir, qint64 capBytes, const QString& ownMarker);

}  // namespace gbui
