// One line per model file for the recent-models menu and the open-model dialog:
// "name — Q4_K_M, 4.6 bpw, 6.2 MiB" (weight type mix, bits per weight, weight
// bytes), read from the file's header and tensor infos only (engine's
// read_weight_summary), never the weights. Cached per path + size + mtime so
// menus stay instant. A file that cannot be read gives "name — cannot read: why".
// The open-model dialog that shows it is ui/window/model_file_dialog.h.
// GUI thread.
#pragma once

#include <QString>

namespace gbui {

// "Q4_K_M, 4.6 bpw, 6.2 MiB", or "cannot read: <reason>".
QString modelFileSummary(const QString& path);
// "<file name> — <modelFileSummary>".
QString modelFileLine(const QString& path);

}  // namespace gbui
