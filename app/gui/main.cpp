// glassbox: the Qt workbench.
//   glassbox [--model PATH | --connect URL [--api-key KEY]] [--prompt TEXT] [--max-tokens N] [--screenshot FILE.png]
//            [--panel NAME] [--device auto|cpu|cuda] [--bf16-matmuls] [--session FILE] [--speculative SPEC]
//            [--sampler JSON]
//   glassbox --bench-chat N [--bench-paragraph-every K]
//   glassbox --bench-chat-turns N
// With --screenshot: load the model, generate for the prompt, select the most
// uncertain token, render the window (or one panel) to PNG and exit. Works with
// QT_QPA_PLATFORM=offscreen. With --speculative (e.g. "ngram:n=2,k=4") the prompt
// is generated twice, speculatively and then plainly (a second branch), so the
// Speculative panel can compare the two; the speculative run goes first so that
// warm-up costs, if anything, count against it. The chat then shows the
// speculative branch. --bench-chat streams N synthetic tokens through the live
// event path into the window and prints frame times and memory as JSON
// (app/gui/chat_bench.h; run it with QT_QPA_PLATFORM=offscreen). --bench-chat-turns
// sends N messages with synthetic answers to a chat panel and prints the time
// per submit as JSON. With no --model or --connect it opens the model of the
// last session, else the starter model an installed package ships
// (share/glassbox/models/stories260K), else nothing.
#include <QApplication>
#include <QCommandLineParser>
#include <QDir>
#include <QDockWidget>
#include <QFile>
#include <QIcon>
#include <QJsonDocument>
#include <QPainter>
#include <QStandardPaths>
#include <QTimer>
#include <QFileInfo>
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "chat_bench.h"
#include "chat/chat_panel.h"
#include "panels/compare_view.h"
#include "panels/inside_panel.h"
#include "panels/score_view.h"
#include "bridge/engine_controller.h"
#include "window/main_window.h"
#include "window/panel_registry.h"
#include "session/session_model.h"
#include "panels/speculative_settings.h"
#include "panels/sampling_panel.h"
#include "panels/token_inspector_panel.h"

namespace {

// Picks the generated token with the lowest chosen probability, so the
// inspector shows an interesting distribution.
void selectInterestingToken(gbui::MainWindow& window) {
  gbui::SessionModel* model = window.sessionModel();
  std::optional<std::pair<quint64, int>> best;
  float bestProb = 2.0f;
  for (const auto& [key, r] : model->requests())
    for (size_t i = r.tokens.firstWhole(); i < r.tokens.size(); ++i) {  // the ones with candidates
      const gbui::UiToken& t = *r.tokens.whole(i);
      const float p = t.remote ? t.probBefore : t.prob;  // a remote engine reports the raw p only
      if (p < bestProb && t.top.size() > 2) {
        bestProb = p;
        best = std::make_pair(key, t.index);
      }
    }
  if (best) model->selectToken(best->first, best->second);
}

int saveScreenshot(gbui::MainWindow& window, const QString& path, const QString& panel) {
  QWidget* target = &window;
  if (!panel.isEmpty()) {
    target = window.panel(panel);
    if (!target) {
      std::fprintf(stderr, "glassbox: --panel %s: no such panel (%s)\n", qPrintable(panel),
                   qPrintable(gbui::panelNames().join(QStringLiteral(", "))));
      return 2;
    }
    if (auto* dock = qobject_cast<QDockWidget*>(target->parentWidget())) dock->raise();
  }
  QApplication::processEvents();
  QImage image = target->grab().toImage();
  if (panel == QLatin1String("speculative")) {
    // The chart alone hides the inline markers: the chat's token view goes on top.
    const QImage chat = window.chat()->view()->grab().toImage();
    QImage both(std::max(chat.width(), image.width()), chat.height() + image.height(), QImage::Format_RGB32);
    both.fill(window.palette().color(QPalette::Window));
    QPainter painter(&both);
    painter.drawImage(0, 0, chat);
    painter.drawImage(0, chat.height(), image);
    painter.end();
    // Flat UI colours: 256 indexed colours keep the file small for the README.
    image = both.convertToFormat(QImage::Format_Indexed8, Qt::ThresholdDither | Qt::AvoidDither);
  }
  if (panel == QLatin1String("compare") || panel == QLatin1String("branches") || panel == QLatin1String("score"))
    image = image.convertToFormat(QImage::Format_Indexed8, Qt::ThresholdDither | Qt::AvoidDither);
  if (!image.save(path, "PNG")) {
    std::fprintf(stderr, "glassbox: cannot write %s\n", qPrintable(path));
    return 1;
  }
  std::printf("glassbox: wrote %s\n", qPrintable(path));
  return 0;
}

// The workbench's command-line options.
struct Options {
  QCommandLineOption model{QStringList{"m", "model"}, "Model file (.gguf or llama2.c .bin).", "PATH"};
  QCommandLineOption prompt{QStringList{"p", "prompt"}, "Prompt to generate from at start.", "TEXT"};
  QCommandLineOption maxTokens{"max-tokens", "Tokens to generate.", "N", "128"};
  QCommandLineOption screenshot{"screenshot", "Render to PNG after generating, then exit.", "FILE.png"};
  QCommandLineOption panel{"panel", "Screenshot only this panel: " + gbui::panelNames().join(", ") + ".", "NAME"};
  QCommandLineOption device{"device", "auto, cpu or cuda.", "DEVICE", "auto"};
  QCommandLineOption bf16Matmuls{"bf16-matmuls", "CPU: round F32/F16 weight matrices to BF16 at load (faster, not exact)."};
  QCommandLineOption session{"session", "Session autosave file.", "FILE"};
  QCommandLineOption width{"width", "Window width for screenshots.", "PX", "1500"};
  QCommandLineOption height{"height", "Window height for screenshots.", "PX", "950"};
  QCommandLineOption speculative{"speculative", "Generate with this drafter spec, then plainly, to compare.", "SPEC"};
  QCommandLineOption sampler{"sampler", "Sampler settings JSON for the run.", "JSON"};
  QCommandLineOption connectTo{"connect", "Use an OpenAI-compatible server as the engine instead of --model.",
                               "http://HOST:PORT/v1"};
  QCommandLineOption apiKey{"api-key", "Bearer key for --connect.", "KEY"};
  QCommandLineOption benchChat{"bench-chat", "Stream N synthetic tokens into the chat, print frame times as JSON.",
                               "N"};
  QCommandLineOption benchParagraph{"bench-paragraph-every", "With --bench-chat: a newline every K tokens (0: none).",
                                    "K", "0"};
  QCommandLineOption benchTurns{"bench-chat-turns",
                                "Send N messages with synthetic answers, print the time per submit as JSON.", "N"};

  void addTo(QCommandLineParser& parser) const {
    parser.addOptions({model, prompt, maxTokens, screenshot, panel, device, bf16Matmuls, session, width, height,
                       speculative, sampler, connectTo, apiKey, benchChat, benchParagraph, benchTurns});
  }
};

// --bench-chat: streams synthetic tokens into a fresh window and prints the frame times.
int runChatBenchCommand(const QCommandLineParser& parser, const Options& o) {
  gbui::ChatBenchOptions options;
  options.tokens = parser.value(o.benchChat).toInt();
  options.paragraphEvery = parser.value(o.benchParagraph).toInt();
  if (options.tokens <= 0 || options.paragraphEvery < 0) {
    std::fprintf(stderr, "glassbox: --bench-chat needs a positive token count\n");
    return 2;
  }
  QFile::remove(QDir::temp().filePath("glassbox-bench-session.json"));
  gbui::MainWindow window(QDir::temp().filePath("glassbox-bench-session.json"));
  window.resize(parser.value(o.width).toInt(), parser.value(o.height).toInt());
  window.show();
  QApplication::processEvents();
  const QJsonObject result = gbui::runChatBench(window, options);
  std::printf("%s\n", QJsonDocument(result).toJson(QJsonDocument::Indented).constData());
  return 0;
}

// --bench-chat-turns N: the exit code.
int benchChatTurns(const QString& value) {
  const int turns = value.toInt();
  if (turns <= 0) {
    std::fprintf(stderr, "glassbox: --bench-chat-turns needs a positive count\n");
    return 2;
  }
  const QJsonObject result = gbui::runChatTurnsBench(turns, 120);
  std::printf("%s\n", QJsonDocument(result).toJson(QJsonDocument::Indented).constData());
  return 0;
}

// --sampler and --speculative: 0, or 2 after printing what is wrong with them.
int applySamplingOptions(gbui::MainWindow& window, const QCommandLineParser& parser, const Options& o) {
  if (parser.isSet(o.sampler)) {
    if (const QString problem = window.sampling()->setSettingsJson(parser.value(o.sampler)); !problem.isEmpty()) {
      std::fprintf(stderr, "glassbox: --sampler: %s\n", qPrintable(problem));
      return 2;
    }
  }
  if (const QString spec = parser.value(o.speculative); !spec.isEmpty()) {
    if (const QString problem = window.sampling()->speculative()->setSpec(spec); !problem.isEmpty()) {
      std::fprintf(stderr, "glassbox: %s\n", qPrintable(problem));
      return 2;
    }
  }
  return 0;
}

// --screenshot with a prompt: waits for the answer (with --speculative, for the
// plain rerun too), prepares the panel asked for (a branch for "branches", a run
// for "compare", a scoring for "score"), then captures it and finishes.
class ScreenshotRun {
 public:
  ScreenshotRun(gbui::MainWindow& window, const QCommandLineParser& parser, const Options& o,
                std::function<void(int)> finish)
      : window_(window),
        path_(parser.value(o.screenshot)),
        panel_(parser.value(o.panel)),
        prompt_(parser.value(o.prompt)),
        spec_(parser.value(o.speculative)),
        maxTokens_(parser.value(o.maxTokens).toInt()),
        finish_(std::move(finish)),
        speculated_(spec_.isEmpty()) {}

  void onConversationChanged() {
    if (window_.chat()->activeRequest() != 0 || window_.sessionModel()->requests().empty()) return;
    if (!speculated_) {
      // The speculative run finished: the same prompt again, plainly; then back
      // to the speculative branch for the capture.
      speculated_ = true;
      window_.sampling()->speculative()->setSpec(QString());
      window_.sampling()->setSeedPinned(true);  // the same sample, plainly: same seed
      QTimer::singleShot(0, &window_, [this] { window_.chat()->regenerate(); });
      return;
    }
    if (capturing_) return;  // showBranch() below reports a change too
    capturing_ = true;
    if (!spec_.isEmpty()) window_.chat()->showBranch(-1);
    selectInterestingToken(window_);
    if (panel_ == QLatin1String("branches") && !branched_) {
      // The tree needs a branch: fork at the most uncertain token with its runner-up.
      branched_ = true;
      capturing_ = false;
      window_.inspector()->branchFromRow(1);
      return;
    }
    if (panel_ == QLatin1String("compare")) return runCompare();
    if (panel_ == QLatin1String("score")) return runScore();
    if (panel_ == QLatin1String("inside")) return runInside();
    capture();
  }

 private:
  void capture() {
    QTimer::singleShot(300, &window_, [this] { finish_(saveScreenshot(window_, path_, panel_)); });
  }

  // The Compare view runs its default lanes plus a greedy one on the same prompt.
  void runCompare() {
    gbui::CompareView* cv = window_.compareView();  // the bars open at the first divergence
    cv->setPrompt(prompt_);
    cv->addLane(QStringLiteral("greedy"), gbui::CompareView::presetJson(QStringLiteral("greedy")));
    cv->setSamples(4);
    cv->setMaxTokens(std::min(48, maxTokens_));
    if (auto* dock = qobject_cast<QDockWidget*>(cv->parentWidget())) {
      dock->setFloating(true);  // room for the columns, the bars and the table
      dock->resize(window_.width(), window_.height() * 9 / 10);
    }
    QObject::connect(cv, &gbui::CompareView::finished, &window_, [this] { capture(); });
    cv->run();
  }

  // Re-scores what was just generated (prompt + answer) and shows the heatmap.
  void runScore() {
    gbui::ScoreView* sv = window_.scoreView();
    const gbui::RequestInfo* r =
        window_.sessionModel()->request(window_.chat()->conversation().turns.back().currentRequest());
    sv->setText(prompt_ + (r ? r->finish.text : QString()));
    QObject::connect(sv, &gbui::ScoreView::finished, &window_, [this, sv] {
      sv->showDetails(sv->numTokens() / 2);
      capture();
    });
    sv->score();
  }

  // Inside the model at the selected token (the most uncertain one).
  void runInside() {
    auto* panel = window_.panelAs<gbui::InsidePanel>("inside");
    if (auto* dock = qobject_cast<QDockWidget*>(panel->parentWidget())) {
      dock->setFloating(true);  // room for the grid, the strip and the top positions
      dock->resize(window_.width() * 3 / 4, window_.height() * 3 / 4);
      dock->raise();
    }
    QObject::connect(panel, &gbui::InsidePanel::reportShown, &window_, [this] { capture(); });
    if (!panel->waiting()) panel->inspectSelected();
  }

  gbui::MainWindow& window_;
  const QString path_, panel_, prompt_, spec_;
  const int maxTokens_;
  const std::function<void(int)> finish_;
  bool speculated_;  // the speculative run (if any) and its plain rerun are done
  bool capturing_ = false;
  bool branched_ = false;
};

// The starter model of an installed package: share/glassbox/models next to the
// executable's prefix (a relocated install too), then the XDG data folders.
QString installedStarterModel() {
  const QString relative = QStringLiteral("glassbox/models/stories260K/stories260K.bin");
  const QString beside = QCoreApplication::applicationDirPath() + QStringLiteral("/../share/") + relative;
  if (QFileInfo(beside).isFile()) return QFileInfo(beside).canonicalFilePath();
  return QStandardPaths::locate(QStandardPaths::GenericDataLocation, relative);
}

// --model / --connect: loads, then sends the prompt or (with nothing to send)
// captures the screenshot; a failed load ends a screenshot run with 1.
void startLoading(gbui::MainWindow& window, const QCommandLineParser& parser, const Options& o,
                  const std::function<void(int)>& finish, const QString& modelPath) {
  const bool shot = parser.isSet(o.screenshot);
  QObject::connect(&window, &gbui::MainWindow::modelReady, &window, [&window, &parser, &o, shot, finish] {
    if (!parser.value(o.prompt).isEmpty()) window.chat()->send();
    else if (shot) finish(saveScreenshot(window, parser.value(o.screenshot), parser.value(o.panel)));
  });
  QObject::connect(&window, &gbui::MainWindow::loadFailed, &window, [shot, finish](const QString& message) {
    std::fprintf(stderr, "glassbox: %s\n", qPrintable(message));
    if (shot) finish(1);
  });
  if (parser.isSet(o.connectTo)) window.connectToServer(parser.value(o.connectTo), parser.value(o.apiKey));
  else window.openModel(modelPath);
}

}  // namespace

// QGuiApplication takes "-session ID" (and "--session ID") for the desktop's
// session manager out of argv before our parser sees it, so "--session FILE"
// would silently autosave to the default file. Joined as "--session=FILE" it
// is ours. `storage` keeps the joined strings alive as long as argv.
static std::vector<char*> joinSessionOption(int& argc, char** argv, std::vector<std::string>& storage) {
  std::vector<char*> out;
  storage.reserve(static_cast<size_t>(argc));
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--session" || arg == "-session") && i + 1 < argc) {
      storage.push_back("--session=" + std::string(argv[++i]));
      out.push_back(storage.back().data());
    } else {
      out.push_back(argv[i]);
    }
  }
  argc = static_cast<int>(out.size());
  out.push_back(nullptr);
  return out;
}

int main(int argc, char** argv) {
  std::vector<std::string> argStorage;
  std::vector<char*> args = joinSessionOption(argc, argv, argStorage);
  argv = args.data();
  QApplication app(argc, argv);
  QApplication::setOrganizationName("Glassbox");
  QApplication::setApplicationName("glassbox");
  QApplication::setApplicationVersion(GLASSBOX_VERSION);
  QApplication::setWindowIcon(QIcon(":/glassbox/glassbox.svg"));
  QCommandLineParser parser;
  parser.setApplicationDescription("Glassbox: a workbench that shows what happens inside LLM inference.");
  parser.addHelpOption();
  parser.addVersionOption();
  const Options o;
  o.addTo(parser);
  parser.process(app);
  if (parser.isSet(o.benchTurns)) return benchChatTurns(parser.value(o.benchTurns));
  if (parser.isSet(o.benchChat)) return runChatBenchCommand(parser, o);

  const bool shot = parser.isSet(o.screenshot);
  // Screenshots start from a fresh session so they do not depend on autosave state.
  const QString sessionPath = parser.isSet(o.session) ? parser.value(o.session)
                              : shot ? QDir::temp().filePath("glassbox-screenshot-session.json") : QString();
  if (shot && !parser.isSet(o.session)) QFile::remove(sessionPath);  // never a file the user named
  gbui::MainWindow window(sessionPath);
  window.setDevice(parser.value(o.device));
  if (parser.isSet(o.bf16Matmuls)) window.setBf16Matmuls(true);
  if (shot) window.resize(parser.value(o.width).toInt(), parser.value(o.height).toInt());
  window.show();

  const QString promptText = parser.value(o.prompt);
  window.chat()->setMaxTokens(parser.value(o.maxTokens).toInt());
  if (!promptText.isEmpty()) window.chat()->setInputText(promptText);
  if (shot) {
    // Completion mode: base models such as stories260K simply continue the text.
    gbui::Conversation c;
    c.completionMode = true;
    window.chat()->setConversation(c);
    window.chat()->setInputText(promptText);
  }
  int exitCode = 0;
  const std::function<void(int)> finish = [&](int code) {
    exitCode = code;
    QTimer::singleShot(0, &app, [&] { app.exit(exitCode); });
  };
  // No model named: the one the last session used, else the starter model an
  // installed package ships (share/glassbox/models), else a window to open one.
  QString modelPath = parser.value(o.model);
  if (!parser.isSet(o.model) && !parser.isSet(o.connectTo)) {
    modelPath = window.savedModelPath();
    if (modelPath.isEmpty()) modelPath = installedStarterModel();
  }
  if (!modelPath.isEmpty() || parser.isSet(o.connectTo)) {
    startLoading(window, parser, o, finish, modelPath);
  } else if (shot) {
    QTimer::singleShot(200, &window, [&] { finish(saveScreenshot(window, parser.value(o.screenshot), parser.value(o.panel))); });
  }
  if (const int rc = applySamplingOptions(window, parser, o); rc != 0) return rc;
  ScreenshotRun run(window, parser, o, finish);
  if (shot && !promptText.isEmpty()) {
    QObject::connect(window.chat(), &gbui::ChatPanel::conversationChanged, &window, [&run] { run.onConversationChanged(); });
    QTimer::singleShot(180000, &window, [&] {
      std::fprintf(stderr, "glassbox: generation did not finish in 180 s\n");
      finish(1);
    });
  }
  const int rc = app.exec();
  return rc != 0 ? rc : exitCode;
}
