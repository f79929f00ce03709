// ConnectDialog: File > "Connect to server..." asks for the URL of an
// OpenAI-compatible server (another Glassbox, llama-server, vLLM) and an
// optional API key; MainWindow then uses it as the engine
// (EngineController::connectRemote). Threads: UI thread.
#pragma once

#include <QDialog>

class QLineEdit;

namespace gbui {

class ConnectDialog : public QDialog {
  Q_OBJECT
 public:
  explicit ConnectDialog(const QString& url, QWidget* parent = nullptr);
  QString url() const;
  QString apiKey() const;

 private:
  QLineEdit* url_ = nullptr;
  QLineEdit* key_ = nullptr;
};

}  // namespace gbui
