// The workbench's session file (conversation, branch tree, sampler settings),
// read back with a clear message when it cannot be used. It is written by
// writeFileAtomically (ui/bridge/atomic_write.h: the engine's atomic write), so
// a crash or SIGKILL at any moment leaves either the previous autosave or the
// new one, never a torn file.
// Threads: UI thread (plain functions).
#pragma once

#include <QJsonObject>
#include <QString>

namespace gbui {

struct SessionRead {
  QJsonObject session;  // empty when there is none or it is unusable
  QString error;        // empty when fine or when there is no file yet
};

// Reads the session. A file that is not a JSON object is reported (and kept
// beside as PATH.unreadable, so the next autosave does not destroy it).
// Temporaries a killed autosave left behind (PATH.tmp-XXXXXX) are removed.
SessionRead readSessionFile(const QString& path);

}  // namespace gbui
