// CompareView: sampler settings side by side on one prompt (docs/compare.md).
// Lanes are columns (name, sampler JSON, duplicate / remove; presets add one);
// a lane's JSON may name a KV eviction policy ("kv_policy", shown under it), so
// policies run side by side as lanes (docs/kv-eviction.md);
// a run streams every lane's shown sample into its column with probability
// colouring and the first divergence from lane A underlined in both; when the
// run ends a summary table fills in; the bars show each lane's next-token
// distribution after its chain at a chosen position (spin box, or click a
// token), drawn token marked.
// The prompt is the text box, or with "Current chat" the chat panel's
// conversation up to its last answer, rendered by the model's chat template
// (runChatRequested; the wiring supplies the messages).
// Export: the engine's comparison JSON and CSV, and a PNG of the view.
//
// It reads tokens from SessionModel (the event stream) and talks to the engine
// only through its signals (runRequested, releaseRequested), which MainWindow
// forwards to EngineController; results come back through the on* slots.
// Threads: UI thread only.
#pragma once

#include <QString>
#include <QStringList>
#include <QVector>
#include <QWidget>

#include "session/settings_codec.h"
#include "session/ui_commands.h"
#include "session/ui_events.h"

class QCheckBox;
class QComboBox;
class QHBoxLayout;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;
class QSplitter;
class QTableWidget;
class QTextBrowser;

namespace gbui {

class TokenList;

class DistributionBars;
class SessionModel;

class CompareView : public QWidget {
  Q_OBJECT
 public:
  CompareView(SessionModel* model, const SettingsCodec& codec, QWidget* parent = nullptr);

  // Lanes (the columns).
  int laneCount() const { return static_cast<int>(lanes_.size()); }
  void addLane(const QString& name, const QString& samplerJson);
  void removeLane(int lane);
  // A copy of `lane` right after it, named "<name> copy", for editing.
  void duplicateLane(int lane);
  QString laneName(int lane) const;
  QString laneSettings(int lane) const;
  void setLaneSettings(int lane, const QString& samplerJson);
  static QStringList presetNames();
  static QString presetJson(const QString& name);

  void setPrompt(const QString& prompt);
  // The chat panel's conversation as the prompt instead of the text box.
  void setUseChat(bool useChat);
  bool useChat() const;
  void setSamples(int samples);
  void setSeed(int seed);
  void setCrn(bool crn);
  void setMaxTokens(int maxTokens);
  void setShownSample(int sample);
  void setPosition(int position);

  // Requests of the running / last comparison, lane-major (empty before a run).
  const QVector<quint64>& requests() const { return requests_; }
  quint64 requestOf(int lane, int sample) const;
  bool isRunning() const { return running_; }
  const QString& resultJson() const { return json_; }
  const QString& resultCsv() const { return csv_; }
  QString columnText(int lane) const;     // plain text shown in a lane's column
  QTableWidget* summaryTable() const { return summary_; }
  DistributionBars* bars() const { return bars_; }
  QString status() const;

  // "" on success, else the message.
  QString exportJson(const QString& path) const;
  QString exportCsv(const QString& path) const;
  QString exportPng(const QString& path);

 public slots:
  void run();
  void onStarted(quint64 tag, const QVector<quint64>& requests);
  void onFinished(quint64 tag, const QString& json, const QString& csv);
  void onFailed(quint64 tag, const QString& message);

 signals:
  // A run whose lanes the settings codec accepted (a lane it refuses is
  // reported in the status line instead). With "Current chat" the command's
  // fromChat is set and the wiring supplies the chat's messages.
  void runRequested(const gbui::CompareCommand& command);
  void releaseRequested();
  void finished();

 private:
  struct Lane {
    QWidget* box = nullptr;
    QLineEdit* name = nullptr;
    QPlainTextEdit* settings = nullptr;
    QLabel* kv = nullptr;  // the lane's KV policy, or why its settings are refused
    QTextBrowser* output = nullptr;
  };
  void createControls();
  QHBoxLayout* buildTopRow();
  QHBoxLayout* buildViewRow();
  QSplitter* buildResults();
  void connectControls();
  void refresh();
  void renderColumns();
  void updateBars();
  void fillSummary();
  int laneIndexOf(const QWidget* box) const;
  void showLanePolicy(QLabel* label, const QString& json) const;
  const TokenList* tokensOf(int lane) const;
  QString saveText(const QString& path, const QString& text) const;
  void exportDialog(const QString& filter, int kind);  // kind: 0 JSON, 1 CSV, 2 PNG

  SessionModel* model_;
  const SettingsCodec& codec_;
  QLineEdit* prompt_;
  QCheckBox* useChat_;
  QSpinBox* samples_;
  QSpinBox* seed_;
  QCheckBox* crn_;
  QSpinBox* maxTokens_;
  QSpinBox* shownSample_;
  QSpinBox* position_;
  QComboBox* preset_;
  QPushButton* run_;
  QPushButton* release_;
  QHBoxLayout* lanesLayout_;
  QTableWidget* summary_;
  DistributionBars* bars_;
  QLabel* status_;
  std::vector<Lane> lanes_;
  QVector<quint64> requests_;
  int runSamples_ = 1;
  int runLanes_ = 0;
  QStringList runNames_;
  quint64 tag_ = 0;
  int laneSerial_ = 0;
  bool running_ = false;
  QString json_, csv_, error_;
};

}  // namespace gbui
