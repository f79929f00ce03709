// The engine's atomic file write (engine/core/atomic_file.h) for Qt callers: a
// temporary PATH.tmp-XXXXXX in the same folder, fsync, rename over the old
// file, fsync of the folder, so a crash or SIGKILL at any moment leaves either
// the previous file or the new one, never a torn file. The workbench writes its
// session file (ui/session/session_file.h) through it.
// Threads: any (a plain function).
#pragma once

#include <QByteArray>
#include <QString>

namespace gbui {

// Empty on success, else a message naming the file and what failed.
QString writeFileAtomically(const QString& path, const QByteArray& bytes);

}  // namespace gbui
