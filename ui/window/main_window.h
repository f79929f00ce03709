// MainWindow: the workbench shell. Owns the engine thread and its
// EngineController, the SessionModel fed by the controller's event batches, and
// the panels as QDockWidgets, built from the panel table (panel_registry.h; the
// layout is saved with QSettings). File menu: open model
// (also drag and drop), recent models, open / export trace; the session
// (conversation and sampler settings) is autosaved atomically.
// Threads: UI thread; the controller runs on engineThread_.
#pragma once

#include <QHash>
#include <QMainWindow>
#include <QThread>
#include <functional>

#include "session/ui_events.h"

class QActionGroup;
class QDockWidget;
class QLabel;
class QMenu;
class QProgressBar;
class QPushButton;
class QScreen;
class QTimer;

namespace gbui {

class BranchesPanel;
class ChatPanel;
class CompareView;
class ScoreView;
class EngineController;
class KvCachePanel;
class ModelInfoPanel;
class PerformancePanel;
class SamplingPanel;
class ServePanel;
class SessionModel;
class SpeculativePanel;
class TokenInspectorPanel;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  // sessionPath: autosave file; empty = QStandardPaths::AppDataLocation/session.json.
  explicit MainWindow(const QString& sessionPath = {}, QWidget* parent = nullptr);
  ~MainWindow() override;

  EngineController* controller() const { return controller_; }
  SessionModel* sessionModel() const { return model_; }
  // The dock or central widget called name: a row of panelSpecs() (panel_registry.h),
  // e.g. "chat", "sampling", "inspector", "kv"; nullptr if there is none.
  QWidget* panel(const QString& name) const;
  // That panel as its class (a fatal error when the row is missing or of another class).
  template <class Panel>
  Panel* panelAs(const char* name) const {
    auto* p = qobject_cast<Panel*>(panel(QLatin1String(name)));
    if (p == nullptr) missingPanel(name);
    return p;
  }
  // The panels by name, for the window's own logic (the chat and its settings),
  // the wiring and tests; the window keeps no member per panel.
  ChatPanel* chat() const;
  SamplingPanel* sampling() const;
  TokenInspectorPanel* inspector() const;
  KvCachePanel* kvCache() const;
  PerformancePanel* performance() const;
  ModelInfoPanel* modelInfo() const;
  SpeculativePanel* speculativePanel() const;
  CompareView* compareView() const;
  BranchesPanel* branchesPanel() const;
  ScoreView* scoreView() const;
  ServePanel* servePanel() const;
  // Autosaves the session half a second from now (coalesced).
  void autosaveSoon();
  // Releases the KV every finished answer keeps except the ones on screen.
  void releaseOldBranches();
  // The size of a window opened without saved geometry: 1400x900, or the
  // screen's available area when that is smaller. The panels' minimum sizes
  // keep the whole window within 1280x720 (a laptop screen less its task bar).
  static QSize defaultWindowSize(const QScreen* screen);
  bool isLoading() const { return loading_; }
  // The model file the restored session was saved with, when it still exists
  // ("" otherwise): what a start with no model named reopens.
  QString savedModelPath() const;
  QString lastError() const { return lastError_; }
  void setDevice(const QString& device) { device_ = device; }
  // Engine > BF16 matmuls (the action's check is the state): whether the next
  // model loaded on the CPU rounds its F32/F16 matrices to BF16 (faster, not
  // exact). Remembered in the settings when chosen from the menu; set here
  // (glassbox --bf16-matmuls) it is not.
  void setBf16Matmuls(bool on);
  bool bf16Matmuls() const;
  // "K/V" KV type names of Engine > KV cache (remembered; next load), e.g. "q8_0/f16".
  QString kvTypes() const;
  void setKvTypes(const QString& kTypeName, const QString& vTypeName);
  // File > Open model...: with no model in the models folder (a first start)
  // the Models dialog's catalog ("Download a model", with "Browse for a
  // file..."), else the file dialog.
  void chooseModel();
  // The file dialog of Open model...: returns the chosen path ("" for none).
  // Tests replace it to observe when it is shown; empty = ModelFileDialog.
  void setModelFileChooser(std::function<QString(QWidget* parent)> chooser) { modelFileChooser_ = std::move(chooser); }

 public slots:
  void openModel(const QString& path);
  // A remote OpenAI-compatible server as the engine (File > Connect to server...).
  void connectToServer(const QString& url, const QString& apiKey);
  void cancelLoad();
  void openTrace(const QString& path);
  void exportTrace(const QString& path, const QString& format);
  // Writes the session file atomically; a failure is shown in the status bar
  // (once per distinct message) and kept in lastError().
  void saveSession();

 signals:
  // After each successful autosave (tests follow autosaves with it).
  void sessionSaved(const QString& path);
  void modelReady();
  void loadFailed(const QString& message);
  void traceReady();
  void exported(const QString& path, const QString& error);

 protected:
  void closeEvent(QCloseEvent* event) override;
  void showEvent(QShowEvent* event) override;
  void dragEnterEvent(QDragEnterEvent* event) override;
  void dropEvent(QDropEvent* event) override;

 private:
  void buildMenus();
  void buildPanels();
  void buildStatusBar();
  void connectEngineToUi();
  void onTraceOpened(const UiModelInfo& info, const UiEventBatch& events);
  [[noreturn]] static void missingPanel(const char* name);
  QDockWidget* addDock(QWidget* widget, const QString& title, const QString& name, Qt::DockWidgetArea area);
  void onModelLoaded(const UiModelInfo& info);
  // Opening `key` (a model path or a server URL) replaces the conversation:
  // asks first when it has branches that would be lost, then runs proceed.
  void confirmNewConversation(const QString& key, const QString& name, const std::function<void()>& proceed);
  void loadModelFile(const QString& path);
  // A new, empty conversation for the model just opened: completion mode for a
  // base model (no chat template), said in the status bar.
  void startConversation(const UiModelInfo& info);
  void onLoadFailed(const QString& path, const QString& message);
  void rememberRecent(const QString& path);
  // The file dialog (or the chooser set for tests); opens what was chosen.
  void browseForModel();
  void rebuildRecentMenu();
  void restoreSession();
  void showError(const QString& title, const QString& message);
  void showEngineWarning(const QString& message);

  QThread engineThread_;
  QHash<QString, QWidget*> panels_;  // by PanelSpec::name; owned by their docks / the window
  EngineController* controller_;
  SessionModel* model_;
  QMenu* recentMenu_ = nullptr;
  QProgressBar* progress_;
  QPushButton* cancelLoad_;
  QLabel* statusModel_;
  QWidget* engineWarning_;         // status bar: the engine's last problem, with a way out
  QLabel* engineWarningText_;
  QPushButton* releaseNow_;
  QTimer* autosave_;
  QString sessionPath_;
  QString lastSaveError_;
  QString device_ = QStringLiteral("auto");
  QAction* bf16Action_ = nullptr;  // Engine > BF16 matmuls
  QActionGroup* kvTypeK_ = nullptr;  // Engine > KV cache > K type (checked action's data: the name)
  QActionGroup* kvTypeV_ = nullptr;
  QString lastError_;
  // The model file (canonical path) or server URL the chat's conversation
  // belongs to; "" when unknown (a restored session that did not say).
  QString conversationSource_;
  bool loading_ = false;
  std::function<QString(QWidget*)> modelFileChooser_;
  bool defaultLayoutPending_ = false;  // no saved layout: size the docks on first show
};

}  // namespace gbui
