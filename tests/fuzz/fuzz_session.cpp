// Workbench session files (ui/session/session_file.h), restored as MainWindow::restoreSession
// does: readSessionFile, branchTreeFromJson with restored keys, SessionModel::
// restoreRequests; then the restored tree written back (branchTreeToJson), as
// the next autosave would. Links the Qt Core parts of ui/ only (no widgets).
#include <QJsonObject>
#include <QString>

#include "session/branch_tree.h"
#include "fuzz_support.h"
#include "session/session_file.h"
#include "session/session_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static gbfuzz::InputFile input("session.json");
  const std::string& path = input.write(data, size);
  const gbui::SessionRead read = gbui::readSessionFile(QString::fromStdString(path));
  const QJsonObject& session = read.session;
  if (session.isEmpty()) return 0;
  QJsonObject tree = session.value("branch_tree").toObject();
  tree.insert("conversation", session.value("conversation"));
  const gbui::RestoredTree restored =
      gbui::branchTreeFromJson(tree, [](quint64 id) { return gbui::restoredKey(id); });
  gbui::SessionModel model;
  model.restoreRequests(restored.requests);
  (void)gbui::branchTreeToJson(restored.conversation, model);
  return 0;
}
