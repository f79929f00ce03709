#include "main_window.h"
#include "session/session_file.h"

#include <QAction>
#include <QActionGroup>
#include <algorithm>
#include <QApplication>
#include <QCloseEvent>
#include <QDir>
#include <QDockWidget>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QJsonDocument>
#include <QSet>
#include <QJsonObject>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QProgressBar>
#include <QPushButton>
#include <QScreen>
#include <QSettings>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTimer>

#include "session/branch_tree.h"
#include "panels/branches_panel.h"
#include "chat/chat_panel.h"
#include "panels/compare_view.h"
#include "connect_dialog.h"
#include "panels/score_view.h"
#include "bridge/atomic_write.h"
#include "bridge/engine_controller.h"
#include "bridge/engine_settings_codec.h"
#include "panels/kv_cache_panel.h"
#include "panels/kv_policy_settings.h"
#include "bridge/model_file_summary.h"
#include "model_file_dialog.h"
#include "models_dialog.h"
#include "panels/model_info_panel.h"
#include "panel_registry.h"
#include "panels/performance_panel.h"
#include "panels/sampling_panel.h"
#include "panels/serve_panel.h"
#include "session/session_model.h"
#include "panels/speculative_panel.h"
#include "panels/speculative_settings.h"
#include "panels/token_inspector_panel.h"

namespace gbui {

QSize MainWindow::defaultWindowSize(const QScreen* screen) {
  const QSize preferred(1400, 900);
  if (screen == nullptr) return preferred;
  // Room for the window manager's title bar and borders (unknown until shown).
  const QSize frame(16, 40);
  return preferred.boundedTo(screen->availableSize() - frame);
}

MainWindow::MainWindow(const QString& sessionPath, QWidget* parent)
    : QMainWindow(parent), controller_(new EngineController), model_(new SessionModel(this)), sessionPath_(sessionPath) {
  qRegisterMetaType<gbui::UiEventBatch>();
  qRegisterMetaType<gbui::UiModelInfo>();
  qRegisterMetaType<gbui::UiChatPrompt>();
  setWindowTitle(tr("Glassbox"));
  setAcceptDrops(true);
  setDockOptions(AnimatedDocks | AllowTabbedDocks | AllowNestedDocks);
  if (sessionPath_.isEmpty()) {
    const QString dir = QStandardPaths::writableLocation(QStandardPaths::AppDataLocation);
    QDir().mkpath(dir);
    sessionPath_ = dir + QStringLiteral("/session.json");
  }

  controller_->moveToThread(&engineThread_);
  connect(&engineThread_, &QThread::finished, controller_, &QObject::deleteLater);
  engineThread_.setObjectName(QStringLiteral("glassbox-engine"));
  engineThread_.start();

  autosave_ = new QTimer(this);
  autosave_->setSingleShot(true);
  autosave_->setInterval(500);
  connect(autosave_, &QTimer::timeout, this, &MainWindow::saveSession);
  buildPanels();  // the rows of panel_registry.cpp, each wired by its row (panel_wiring.cpp)
  buildStatusBar();
  connectEngineToUi();

  buildMenus();
  QSettings settings;
  restoreGeometry(settings.value("window/geometry").toByteArray());
  restoreState(settings.value("window/state").toByteArray());
  if (!settings.contains("window/state")) {
    resize(defaultWindowSize(screen()));
    defaultLayoutPending_ = true;  // sized from the window's size when it is first shown
  }
  restoreSession();
}

// The status bar: the model label, the engine-warning row and the load progress.
void MainWindow::buildStatusBar() {
  progress_ = new QProgressBar;
  progress_->setObjectName(QStringLiteral("loadProgress"));
  progress_->setRange(0, 0);
  progress_->setMaximumWidth(160);
  progress_->setVisible(false);
  cancelLoad_ = new QPushButton(tr("Cancel"));
  cancelLoad_->setObjectName(QStringLiteral("cancelLoad"));
  cancelLoad_->setVisible(false);
  statusModel_ = new QLabel(tr("No model"));
  statusModel_->setObjectName(QStringLiteral("statusModel"));
  statusBar()->addWidget(statusModel_, 1);
  // An engine problem stays in view until dismissed, with the one-click way out
  // when finished answers hold KV blocks.
  engineWarning_ = new QWidget;
  engineWarning_->setObjectName(QStringLiteral("engineWarning"));
  auto* warningRow = new QHBoxLayout(engineWarning_);
  warningRow->setContentsMargins(0, 0, 0, 0);
  engineWarningText_ = new QLabel;
  engineWarningText_->setObjectName(QStringLiteral("engineWarningText"));
  engineWarningText_->setStyleSheet(QStringLiteral("color: #b02020;"));
  engineWarningText_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  releaseNow_ = new QPushButton(tr("Release old branches"));
  releaseNow_->setObjectName(QStringLiteral("releaseBranchesNow"));
  auto* dismiss = new QPushButton(tr("Dismiss"));
  dismiss->setObjectName(QStringLiteral("dismissWarning"));
  warningRow->addWidget(engineWarningText_, 1);
  warningRow->addWidget(releaseNow_);
  warningRow->addWidget(dismiss);
  engineWarning_->setVisible(false);
  statusBar()->addWidget(engineWarning_, 3);
  connect(releaseNow_, &QPushButton::clicked, this, &MainWindow::releaseOldBranches);
  connect(dismiss, &QPushButton::clicked, engineWarning_, &QWidget::hide);
  statusBar()->addPermanentWidget(progress_);
  statusBar()->addPermanentWidget(cancelLoad_);
  connect(cancelLoad_, &QPushButton::clicked, this, &MainWindow::cancelLoad);
}

// Engine -> UI: queued signals (different threads).
void MainWindow::connectEngineToUi() {
  connect(controller_, &EngineController::eventsReady, model_, &SessionModel::apply);
  connect(controller_, &EngineController::modelLoaded, this, &MainWindow::onModelLoaded);
  connect(controller_, &EngineController::modelLoadFailed, this, &MainWindow::onLoadFailed);
  connect(controller_, &EngineController::loadProgress, this, [this](int percent) {
    if (!loading_) return;
    progress_->setRange(0, 100);
    progress_->setValue(percent);
  });
  // A refused request (bad speculative spec, a draft model with another
  // vocabulary) is shown; the window and the loaded model stay as they were.
  connect(controller_, &EngineController::requestFailed, this,
          [this](quint64, const QString& message) { showError(tr("Request refused"), message); });
  connect(controller_, &EngineController::engineError, this, &MainWindow::showEngineWarning);
  connect(model_, &SessionModel::errorReported, this, [this](const QString& m) {
    if (!model_->isReplay()) showEngineWarning(m);
  });
  connect(controller_, &EngineController::branchesReleased, this, [this](int n) {
    engineWarning_->hide();
    statusBar()->showMessage(tr("Released the KV of %n finished answer(s); their full blocks stay cached.", nullptr, n), 5000);
  });
  connect(controller_, &EngineController::exportFinished, this, [this](const QString& path, const QString& error) {
    // Braces: clang reads `emit` (an empty macro) as misleading indentation after an else.
    if (!error.isEmpty()) {
      showError(tr("Export trace"), error);
    } else {
      statusBar()->showMessage(tr("Trace written to %1").arg(path), 5000);
    }
    emit exported(path, error);
  });
  connect(controller_, &EngineController::traceOpened, this, &MainWindow::onTraceOpened);
  connect(controller_, &EngineController::traceOpenFailed, this,
          [this](const QString& path, const QString& m) { showError(tr("Open trace"), tr("%1\n\n%2").arg(path, m)); });
}

// A trace opened for replay: its events, and the conversation and branch tree
// of a workbench export.
void MainWindow::onTraceOpened(const UiModelInfo& info, const UiEventBatch& events) {
  model_->setModelInfo(info);
  model_->forgetRestored();
  model_->setReplay(true);
  Conversation replay;
  replay.completionMode = true;
  QSet<quint64> recorded;
  for (const auto& e : *events)
    if (const auto* s = std::get_if<UiSubmitted>(&e.body)) {
      recorded.insert(s->request);
      // The engine's own requests (an inspection's prefill) are no turn.
      if (!s->parent && !s->purpose) replay.turns.push_back({QStringLiteral("assistant"), QString(), {s->request}, 0});
    }
  model_->apply(events);
  if (!info.branchTreeJson.isEmpty()) {
    // A workbench export: its conversation and tree; nodes recorded in the
    // trace are its replayed requests, the others (restored from an earlier
    // session) come from the tree.
    const RestoredTree tree =
        branchTreeFromJson(QJsonDocument::fromJson(info.branchTreeJson.toUtf8()).object(),
                           [&](quint64 id) { return recorded.contains(id) ? id : restoredKey(id); });
    std::vector<RequestInfo> saved;
    for (const RequestInfo& r : tree.requests)
      if (isRestoredKey(r.key)) saved.push_back(r);
    model_->restoreRequests(saved);
    if (!tree.conversation.turns.isEmpty()) replay = tree.conversation;  // else every request, as before
  }
  chat()->setConversation(replay);
  conversationSource_ = QStringLiteral("replay:") + info.path;
  statusModel_->setText(tr("Replay: %1").arg(info.name));
  emit traceReady();
}

MainWindow::~MainWindow() {
  controller_->stopThread();
  engineThread_.wait();
}

void MainWindow::showEvent(QShowEvent* event) {
  QMainWindow::showEvent(event);
  if (!defaultLayoutPending_) return;
  defaultLayoutPending_ = false;
  // Docks in proportion to the window (1400x900 up to 1920x1080 and beyond),
  // never below what their content needs: the inspector's chart and table,
  // the sampling sliders, the KV grid with its numbers. After the first layout
  // pass (sizes set before it are overridden by the docks' size hints).
  QTimer::singleShot(0, this, [this] {
    const int w = width(), h = height();
    resizeDocks({findChild<QDockWidget*>("inspector")}, {std::max(470, w * 32 / 100)}, Qt::Horizontal);
    resizeDocks({findChild<QDockWidget*>("sampling")}, {std::max(350, w * 22 / 100)}, Qt::Horizontal);
    resizeDocks({findChild<QDockWidget*>("kv")}, {std::max(250, h * 28 / 100)}, Qt::Vertical);
    // The first tab of each group in front (tabifying shows the newest tab).
    for (const char* name : {"inspector", "kv"})
      if (auto* dock = findChild<QDockWidget*>(name)) dock->raise();
  });
}

QDockWidget* MainWindow::addDock(QWidget* widget, const QString& title, const QString& name, Qt::DockWidgetArea area) {
  auto* dock = new QDockWidget(title, this);
  dock->setObjectName(name);  // restoreState() finds docks by object name
  dock->setWidget(widget);
  addDockWidget(area, dock);
  return dock;
}

void MainWindow::buildPanels() {
  QHash<QString, QDockWidget*> docks;
  for (const PanelSpec& spec : panelSpecs()) {
    const QString name = QLatin1String(spec.name);
    QWidget* widget = spec.create(PanelContext{model_, &engineSettingsCodec()});
    panels_.insert(name, widget);
    if (spec.area == Qt::NoDockWidgetArea) {
      setCentralWidget(widget);
      continue;
    }
    QDockWidget* dock = addDock(widget, tr(spec.title), name, spec.area);
    if (spec.tabifyWith != nullptr) {
      QDockWidget* first = docks.value(QLatin1String(spec.tabifyWith));
      if (first == nullptr) qFatal("panel %s: tabifyWith %s is not an earlier dock", spec.name, spec.tabifyWith);
      tabifyDockWidget(first, dock);
    }
    docks.insert(name, dock);
  }
  if (QDockWidget* kv = docks.value(QStringLiteral("kv"))) kv->raise();  // the bottom group opens on the KV map
  // Then each row wires its panel (panel_wiring.cpp): every panel exists by now.
  for (const PanelSpec& spec : panelSpecs())
    if (spec.wire != nullptr) spec.wire(panels_.value(QLatin1String(spec.name)), *this);
}

QWidget* MainWindow::panel(const QString& name) const { return panels_.value(name); }

void MainWindow::missingPanel(const char* name) {
  qFatal("panel %s: missing from panel_registry.cpp or of another type", name);
}

ChatPanel* MainWindow::chat() const { return panelAs<ChatPanel>("chat"); }
SamplingPanel* MainWindow::sampling() const { return panelAs<SamplingPanel>("sampling"); }
TokenInspectorPanel* MainWindow::inspector() const { return panelAs<TokenInspectorPanel>("inspector"); }
KvCachePanel* MainWindow::kvCache() const { return panelAs<KvCachePanel>("kv"); }
PerformancePanel* MainWindow::performance() const { return panelAs<PerformancePanel>("performance"); }
ModelInfoPanel* MainWindow::modelInfo() const { return panelAs<ModelInfoPanel>("model"); }
SpeculativePanel* MainWindow::speculativePanel() const { return panelAs<SpeculativePanel>("speculative"); }
CompareView* MainWindow::compareView() const { return panelAs<CompareView>("compare"); }
BranchesPanel* MainWindow::branchesPanel() const { return panelAs<BranchesPanel>("branches"); }
ScoreView* MainWindow::scoreView() const { return panelAs<ScoreView>("score"); }
ServePanel* MainWindow::servePanel() const { return panelAs<ServePanel>("serve"); }

void MainWindow::autosaveSoon() { autosave_->start(); }

void MainWindow::chooseModel() {
  if (ModelLibrary::hasModels(ModelLibrary::defaultDir())) return browseForModel();
  // A first start: the catalog, with the file dialog one click away.
  auto* dialog = new ModelsDialog({}, this, ModelsDialog::Mode::FirstStart);
  dialog->setAttribute(Qt::WA_DeleteOnClose);
  connect(dialog, &ModelsDialog::openRequested, this, &MainWindow::openModel);
  // Queued: the file dialog runs its own event loop, not inside the click.
  connect(dialog, &ModelsDialog::browseRequested, this, &MainWindow::browseForModel, Qt::QueuedConnection);
  dialog->open();
}

void MainWindow::browseForModel() {
  QString path;
  if (modelFileChooser_) {
    path = modelFileChooser_(this);
  } else {
    ModelFileDialog dialog(this);
    if (dialog.exec() == QDialog::Accepted && !dialog.selectedFiles().isEmpty()) path = dialog.selectedFiles().front();
  }
  if (!path.isEmpty()) openModel(path);
}

QString MainWindow::savedModelPath() const {
  const QFileInfo file(conversationSource_);
  return !conversationSource_.isEmpty() && file.isFile() ? conversationSource_ : QString();
}

void MainWindow::buildMenus() {
  // Actions carry object names, like the widgets, for tests and accessibility tools.
  auto named = [](QAction* action, const char* name) { action->setObjectName(QLatin1String(name)); };
  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->setObjectName(QStringLiteral("menuFile"));
  named(file->addAction(tr("&Open model..."), QKeySequence::Open, this, &MainWindow::chooseModel), "actionOpenModel");
  named(file->addAction(tr("&Models..."), this, [this] {
    auto* dialog = new ModelsDialog({}, this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    connect(dialog, &ModelsDialog::openRequested, this, &MainWindow::openModel);
    dialog->open();
  }), "actionModels");
  named(file->addAction(tr("&Connect to server..."), this, [this] {
    ConnectDialog dialog(model_->modelInfo().remoteUrl, this);
    if (dialog.exec() == QDialog::Accepted && !dialog.url().isEmpty()) connectToServer(dialog.url(), dialog.apiKey());
  }), "actionConnectServer");
  recentMenu_ = file->addMenu(tr("Recent models"));
  recentMenu_->setObjectName(QStringLiteral("menuRecent"));
  rebuildRecentMenu();
  file->addSeparator();
  named(file->addAction(tr("Open &trace..."), this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, tr("Open trace"), {}, tr("Trace (*.jsonl);;All files (*)"));
    if (!path.isEmpty()) openTrace(path);
  }), "actionOpenTrace");
  named(file->addAction(tr("&Export trace (JSON Lines)..."), this, [this] {
    const QString path = QFileDialog::getSaveFileName(this, tr("Export trace"), {}, tr("JSON Lines (*.jsonl)"));
    if (!path.isEmpty()) exportTrace(path, "jsonl");
  }), "actionExportTrace");
  named(file->addAction(tr("Export trace (&Chrome / Perfetto)..."), this, [this] {
    const QString path = QFileDialog::getSaveFileName(this, tr("Export Chrome trace"), {}, tr("JSON (*.json)"));
    if (!path.isEmpty()) exportTrace(path, "chrome");
  }), "actionExportChrome");
  file->addSeparator();
  named(file->addAction(tr("New conversation"), QKeySequence::New, chat(), &ChatPanel::clearConversation),
        "actionNewConversation");
  named(file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close), "actionQuit");
  QMenu* engine = menuBar()->addMenu(tr("&Engine"));
  engine->setObjectName(QStringLiteral("menuEngine"));
  QAction* pause = engine->addAction(tr("&Pause"));
  named(pause, "actionPause");
  pause->setCheckable(true);
  connect(pause, &QAction::toggled, this, [this](bool on) { controller_->setPaused(on); });
  named(engine->addAction(tr("&Release old branches"), this, &MainWindow::releaseOldBranches), "actionReleaseBranches");
  engine->addSeparator();
  bf16Action_ = engine->addAction(tr("&BF16 matmuls (faster, not exact; next load)"));
  named(bf16Action_, "actionBf16Matmuls");
  bf16Action_->setCheckable(true);
  bf16Action_->setChecked(QSettings().value("engine/bf16Matmuls", false).toBool());
  bf16Action_->setToolTip(tr("On the CPU, round F32 and F16 weight matrices to BF16 when a model is loaded and run them "
                             "as bf16 dot products: faster prefill where the processor has AVX512-BF16, at the cost "
                             "of exactness. Applies to the next model opened."));
  connect(bf16Action_, &QAction::triggered, this, [this](bool on) {
    QSettings().setValue("engine/bf16Matmuls", on);
    statusBar()->showMessage(on ? tr("BF16 matmuls: on from the next model opened")
                                : tr("BF16 matmuls: off from the next model opened"), 5000);
  });
  // KV cache types, K and V apart: every row of the KV type table, the choice
  // remembered and applied to the next model opened.
  QMenu* kvMenu = engine->addMenu(tr("&KV cache types (next load)"));
  kvMenu->setObjectName(QStringLiteral("menuKvTypes"));
  for (int part = 0; part < 2; ++part) {
    const QString key = part == 0 ? QStringLiteral("engine/kvTypeK") : QStringLiteral("engine/kvTypeV");
    const SettingsCodec& codec = engineSettingsCodec();
    const QString saved = QSettings().value(key, codec.defaultKvType()).toString();
    QMenu* sub = kvMenu->addMenu(part == 0 ? tr("&K type") : tr("&V type"));
    auto* group = new QActionGroup(sub);
    group->setExclusive(true);
    for (const KvTypeOption& row : codec.kvTypes()) {
      const QString& name = row.name;
      QAction* a = sub->addAction(name);
      a->setObjectName(QStringLiteral("actionKvType%1_%2").arg(part == 0 ? "K" : "V", name));
      a->setCheckable(true);
      a->setData(name);
      a->setToolTip(row.description);
      a->setChecked(name == saved);
      group->addAction(a);
    }
    connect(group, &QActionGroup::triggered, this, [this, key, part](QAction* a) {
      QSettings().setValue(key, a->data().toString());
      statusBar()->showMessage(tr("KV %1 type: %2 from the next model opened")
                                   .arg(part == 0 ? "K" : "V", a->data().toString()), 5000);
    });
    (part == 0 ? kvTypeK_ : kvTypeV_) = group;
  }
  QMenu* view = menuBar()->addMenu(tr("&View"));
  view->setObjectName(QStringLiteral("menuView"));
  for (QDockWidget* dock : findChildren<QDockWidget*>()) view->addAction(dock->toggleViewAction());
}

void MainWindow::setBf16Matmuls(bool on) { bf16Action_->setChecked(on); }

bool MainWindow::bf16Matmuls() const { return bf16Action_->isChecked(); }

QString MainWindow::kvTypes() const {
  const auto name = [](QActionGroup* g) { return g->checkedAction() ? g->checkedAction()->data().toString() : QString(); };
  return name(kvTypeK_) + '/' + name(kvTypeV_);
}

void MainWindow::setKvTypes(const QString& kTypeName, const QString& vTypeName) {
  for (auto [group, name] : {std::pair{kvTypeK_, kTypeName}, std::pair{kvTypeV_, vTypeName}})
    for (QAction* a : group->actions())
      if (a->data().toString().compare(name, Qt::CaseInsensitive) == 0) a->setChecked(true);
}

namespace {
// The session file's "kv_policy": {"policy", "budget", "sinks", "shadow"}.
QJsonObject kvPolicyToJson(const KvPolicyChoice& c) {
  return {{"policy", c.policy}, {"budget", c.budget}, {"sinks", c.sinks}, {"shadow", c.shadow}};
}

KvPolicyChoice kvPolicyFromJson(const QJsonObject& o) {
  KvPolicyChoice c;
  c.policy = o.value("policy").toString(QStringLiteral("full"));
  c.budget = o.value("budget").toInt(0);
  c.sinks = o.value("sinks").toInt(-1);
  c.shadow = o.value("shadow").toBool(false);
  return c;
}

// What a conversation belongs to: a model file (its canonical path) or a server.
QString conversationKey(const UiModelInfo& info) {
  if (!info.remoteUrl.isEmpty()) return info.remoteUrl;
  const QString canonical = QFileInfo(info.path).canonicalFilePath();
  return canonical.isEmpty() ? info.path : canonical;
}
}  // namespace

void MainWindow::confirmNewConversation(const QString& key, const QString& name, const std::function<void()>& proceed) {
  const QString canonical = QFileInfo(key).canonicalFilePath();
  const QString target = canonical.isEmpty() ? key : canonical;
  if (!chat()->hasBranches() || conversationSource_.isEmpty() || target == conversationSource_) return proceed();
  // Window-modal but non-blocking: the event loop (and the engine) keep running.
  auto* box = new QMessageBox(QMessageBox::Question, tr("Start a new conversation?"),
                              tr("Opening %1 starts a new conversation. The answers on the current conversation's "
                                 "other branches will be gone (File > Export trace keeps them).")
                                  .arg(name),
                              QMessageBox::NoButton, this);
  box->setObjectName(QStringLiteral("newConversationDialog"));
  QPushButton* open = box->addButton(tr("Open"), QMessageBox::AcceptRole);
  open->setObjectName(QStringLiteral("confirmNewConversation"));
  box->addButton(QMessageBox::Cancel);
  box->setDefaultButton(open);
  box->setAttribute(Qt::WA_DeleteOnClose);
  connect(box, &QMessageBox::buttonClicked, this, [open, proceed](QAbstractButton* clicked) {
    if (clicked == open) proceed();
  });
  box->open();
}

void MainWindow::openModel(const QString& path) {
  confirmNewConversation(path, QFileInfo(path).fileName(), [this, path] { loadModelFile(path); });
}

void MainWindow::loadModelFile(const QString& path) {
  loading_ = true;
  lastError_.clear();
  progress_->setRange(0, 0);  // busy until the loader reports progress
  progress_->setVisible(true);
  cancelLoad_->setVisible(true);
  statusModel_->setText(tr("Loading %1...").arg(QFileInfo(path).fileName()));
  LoadCommand command;
  command.path = path;
  command.device = device_;
  command.bf16Matmuls = bf16Matmuls();
  command.kvTypes = kvTypes();
  command.generation = controller_->beginLoad();
  controller_->post([command](EngineController* c) { c->loadModel(command); });
}

void MainWindow::connectToServer(const QString& url, const QString& apiKey) {
  confirmNewConversation(url, url, [this, url, apiKey] {
    loading_ = true;
    lastError_.clear();
    progress_->setRange(0, 0);
    progress_->setVisible(true);
    cancelLoad_->setVisible(true);
    statusModel_->setText(tr("Connecting to %1...").arg(url));
    const int generation = controller_->beginLoad();
    controller_->post([=](EngineController* c) { c->connectRemote(url, apiKey, generation); });
  });
}

void MainWindow::cancelLoad() {
  if (!loading_) return;
  controller_->cancelLoad();
  loading_ = false;
  progress_->setVisible(false);
  cancelLoad_->setVisible(false);
  statusModel_->setText(model_->hasModel() ? model_->modelInfo().name : tr("No model"));
}

void MainWindow::onModelLoaded(const UiModelInfo& info) {
  if (!loading_) return;  // cancelled: the controller drops such loads, this is belt and braces
  loading_ = false;
  progress_->setVisible(false);
  cancelLoad_->setVisible(false);
  model_->setReplay(false);
  model_->setModelInfo(info);  // every panel's selection and stale view goes (SessionModel::cleared)
  chat()->setFormat(QStringLiteral("model"));  // the engine falls back (with a warning) when it has none
  statusModel_->setText(tr("%1 \u2014 %2, %3").arg(info.name, info.deviceBackend, info.deviceName));
  // Another model (or the first one): a new conversation, in the mode the model
  // suits. A conversation restored for this same model stays.
  const QString key = conversationKey(info);
  if (chat()->conversation().turns.isEmpty() || key != conversationSource_) startConversation(info);
  conversationSource_ = key;
  if (info.remoteUrl.isEmpty()) rememberRecent(info.path);  // Recent lists model files only
  autosave_->start();
  emit modelReady();
}

void MainWindow::startConversation(const UiModelInfo& info) {
  // A base model (no chat template in the file) continues text: chat turns
  // would be rendered in a format it was never trained on.
  const bool base = info.remoteUrl.isEmpty() && info.chatTemplate.isEmpty();
  model_->forgetRestored();
  chat()->clearConversation();
  Conversation fresh;
  fresh.completionMode = base;
  fresh.format = QStringLiteral("model");
  fresh.systemPrompt = chat()->conversation().systemPrompt;
  chat()->setConversation(fresh);
  if (base)
    statusBar()->showMessage(tr("%1 has no chat template: opened in completion mode (the text is continued as "
                                "written). Chat mode would use a built-in format.")
                                 .arg(info.name),
                             15000);
}

void MainWindow::onLoadFailed(const QString& path, const QString& message) {
  if (!loading_) return;  // cancelled
  loading_ = false;
  progress_->setVisible(false);
  cancelLoad_->setVisible(false);
  statusModel_->setText(model_->hasModel() ? model_->modelInfo().name : tr("No model"));
  showError(tr("Cannot open model"), tr("%1\n\n%2").arg(path, message));
  emit loadFailed(message);
}

void MainWindow::showEngineWarning(const QString& message) {
  lastError_ = message;
  engineWarningText_->setText(message);
  engineWarningText_->setToolTip(message);
  releaseNow_->setVisible(panelAs<KvCachePanel>("kv")->numKeptRequests() > 0);
  engineWarning_->show();
}

void MainWindow::releaseOldBranches() {
  // The answers on screen keep their KV (a branch from them stays copy-on-write).
  QVector<quint64> keep;
  for (const Turn& turn : chat()->conversation().turns)
    if (turn.currentRequest() != 0) keep.push_back(turn.currentRequest());
  if (chat()->activeRequest() != 0) keep.push_back(chat()->activeRequest());
  controller_->post([=](EngineController* c) { c->releaseBranches(keep); });
}

void MainWindow::showError(const QString& title, const QString& message) {
  lastError_ = message;
  // Window-modal but non-blocking: the event loop (and the engine) keep running.
  auto* box = new QMessageBox(QMessageBox::Warning, title, message, QMessageBox::Ok, this);
  box->setAttribute(Qt::WA_DeleteOnClose);
  box->setObjectName(QStringLiteral("errorDialog"));
  box->open();
}

void MainWindow::openTrace(const QString& path) {
  controller_->post([=](EngineController* c) { c->openTrace(path); });
}

void MainWindow::exportTrace(const QString& path, const QString& format) {
  // The branch tree and the conversation ride in the trace's header.
  const QString branches = QString::fromUtf8(
      QJsonDocument(branchTreeToJson(chat()->conversation(), *model_)).toJson(QJsonDocument::Compact));
  controller_->post([=](EngineController* c) { c->exportTrace(path, format, branches); });
}

void MainWindow::rememberRecent(const QString& path) {
  QSettings settings;
  QStringList recent = settings.value("recentModels").toStringList();
  recent.removeAll(path);
  recent.prepend(path);
  settings.setValue("recentModels", recent.mid(0, 8));
  rebuildRecentMenu();
}

void MainWindow::rebuildRecentMenu() {
  recentMenu_->clear();
  for (const QString& path : QSettings().value("recentModels").toStringList()) {
    QAction* action = recentMenu_->addAction(modelFileLine(path), this, [this, path] { openModel(path); });
    action->setToolTip(path);
    action->setData(path);
  }
  recentMenu_->setEnabled(!recentMenu_->isEmpty());
}

void MainWindow::saveSession() {
  // The conversation and the branch tree under it (ui/branch_tree.h), ids
  // renumbered the same way in both.
  QJsonObject tree = branchTreeToJson(chat()->conversation(), *model_);
  const QJsonValue conversation = tree.take("conversation");
  const QJsonObject session{{"model", model_->isReplay() || model_->isRemote() ? QString() : model_->modelInfo().path},
                            {"conversation", conversation},
                            {"branch_tree", tree},
                            {"sampler", QJsonDocument::fromJson(sampling()->settingsJson().toUtf8()).object()},
                            {"speculative", sampling()->speculative()->spec()},
                            {"kv_policy", kvPolicyToJson(sampling()->kvPolicy()->choice())}};
  // Temporary file, fsync, rename, fsync of the folder: a crash or kill leaves
  // the previous autosave or this one, never a torn file (ui/bridge/atomic_write.h).
  const QString error = writeFileAtomically(sessionPath_, QJsonDocument(session).toJson());
  if (error.isEmpty()) {
    lastSaveError_.clear();
    emit sessionSaved(sessionPath_);
    return;
  }
  if (error == lastSaveError_) return;  // said once, not every half second
  lastSaveError_ = error;
  lastError_ = tr("Autosave failed: %1").arg(error);
  statusBar()->showMessage(lastError_, 10000);
}

void MainWindow::restoreSession() {
  const SessionRead read = readSessionFile(sessionPath_);
  if (!read.error.isEmpty()) {
    lastError_ = read.error;
    statusBar()->showMessage(read.error, 15000);
  }
  const QJsonObject& session = read.session;
  if (session.isEmpty()) return;
  if (session.contains("sampler"))
    sampling()->setSettingsJson(QString::fromUtf8(QJsonDocument(session.value("sampler").toObject()).toJson()));
  sampling()->speculative()->setSpec(session.value("speculative").toString());
  // A policy the engine no longer accepts leaves the controls at full (said in the status bar).
  if (const QJsonValue kv = session.value("kv_policy"); kv.isObject())
    if (const QString problem = sampling()->kvPolicy()->setChoice(kvPolicyFromJson(kv.toObject())); !problem.isEmpty())
      statusBar()->showMessage(tr("Saved KV eviction policy not restored: %1").arg(problem), 15000);
  // The saved requests get restored keys: they never collide with the ids of
  // the engine that runs now. A file without a tree restores the conversation.
  QJsonObject tree = session.value("branch_tree").toObject();
  tree.insert("conversation", session.value("conversation"));
  RestoredTree restored = branchTreeFromJson(tree, [](quint64 id) { return restoredKey(id); });
  model_->restoreRequests(restored.requests);
  chat()->setConversation(restored.conversation);
  // The model the conversation was saved with ("" when unknown: it stays with whatever opens).
  const QString saved = session.value("model").toString();
  const QString canonical = QFileInfo(saved).canonicalFilePath();
  conversationSource_ = canonical.isEmpty() ? saved : canonical;
}

void MainWindow::closeEvent(QCloseEvent* event) {
  saveSession();
  QSettings settings;
  settings.setValue("window/geometry", saveGeometry());
  settings.setValue("window/state", saveState());
  event->accept();
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
  if (event->mimeData()->hasUrls()) event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event) {
  const QList<QUrl> urls = event->mimeData()->urls();
  if (urls.isEmpty()) return;
  const QString path = urls.front().toLocalFile();
  if (path.endsWith(QLatin1String(".jsonl"))) openTrace(path);
  else openModel(path);
}

}  // namespace gbui
