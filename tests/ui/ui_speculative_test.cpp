// Speculative decoding in the workbench, against the real engine on stories260K:
// greedy speculative output (n-gram, draft model, self-draft) streams exactly the
// tokens of plain generation (the golden greedy output of llama2.c's run.c, an
// independent implementation); the acceptance chart's bars equal the acceptance
// by position computed here from the exported trace's SpeculativeEvents; the
// chat's origin markers match the trace's TokenSampledEvent origins, live and
// after replaying the trace; a draft model with another vocabulary is refused
// with the engine's message and the app stays usable.
#include <QApplication>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QMessageBox>

#include "gb_qtest_main.h"
#include "panels/speculative_panel.h"
#include "panels/speculative_settings.h"
#include "chat/token_view.h"
#include "trace/trace_jsonl.h"
#include "ui_test_support.h"

using namespace gbuitest;

// Not in the anonymous namespace: the test class has a member of this type (GCC's
// -Wsubobject-linkage when this file is compiled in a unity batch).
struct SpeculativeGolden {
  QString prompt;
  std::vector<int> ids;
};

namespace {

SpeculativeGolden loadGolden() {
  QFile f(sharedFile("testdata/golden/once_upon_a_time_n256.json"));
  SpeculativeGolden g;
  if (!f.open(QIODevice::ReadOnly)) return g;
  const QJsonObject o = QJsonDocument::fromJson(f.readAll()).object();
  g.prompt = o.value("prompt").toString();
  for (const QJsonValue& v : o.value("generated_tokens").toArray()) g.ids.push_back(v.toInt());
  return g;
}

std::vector<int> lastTokens(gbui::MainWindow& window) {
  std::vector<int> out;
  const gbui::RequestInfo* r =
      window.sessionModel()->request(window.chat()->conversation().turns.back().currentRequest());
  if (r)
    for (const gbui::UiToken& t : r->tokens) out.push_back(t.tokenId);
  return out;
}

// The marker each origin must get (written out here, not read from TokenView).
QTextCharFormat::UnderlineStyle expectedUnderline(gb::TokenOrigin origin) {
  switch (origin) {
    case gb::TokenOrigin::Accepted: return QTextCharFormat::SingleUnderline;
    case gb::TokenOrigin::Resampled: return QTextCharFormat::WaveUnderline;
    case gb::TokenOrigin::Bonus: return QTextCharFormat::DotLine;
    case gb::TokenOrigin::Forced: return QTextCharFormat::DashUnderline;
    case gb::TokenOrigin::Plain: break;
  }
  return QTextCharFormat::NoUnderline;
}

}  // namespace

class UiSpeculativeTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QApplication::setOrganizationName("GlassboxTest");
    QVERIFY2(QFile::exists(storiesPath()), qPrintable("missing test data: " + storiesPath()));
    golden_ = loadGolden();
    QVERIFY2(golden_.ids.size() > 100, "missing test data: testdata/golden/once_upon_a_time_n256.json");
    QVERIFY(dir_.isValid());
  }

  void ngramStreamsPlainTokensAndChartMatchesTrace() {
    auto window = makeWindow(dir_);
    QVERIFY(loadStories(*window));
    QCOMPARE(window->sampling()->setSettingsJson(kGreedyJson), QString());
    const int n = static_cast<int>(golden_.ids.size());
    // Plain first: the reference the speed-up compares against.
    QCOMPARE(window->sampling()->speculative()->setSpec(QString()), QString());
    QVERIFY(generate(*window, golden_.prompt, n));
    QCOMPARE(lastTokens(*window), golden_.ids);
    // fallback=off: the test is about what is shown, so drafting must not stop
    // on a timing decision (which would make the counts depend on the machine).
    QCOMPARE(window->sampling()->speculative()->setSpec("ngram:n=2,k=4,fallback=off"), QString());
    QCOMPARE(window->sampling()->speculative()->spec(), QString("ngram:n=2,k=4,fallback=off"));
    QVERIFY(generate(*window, golden_.prompt, n));
    QCOMPARE(lastTokens(*window), golden_.ids);
    const gbui::RequestKey specKey = window->chat()->conversation().turns.back().currentRequest();

    // The engine's own record of the session, read back through the trace file.
    const QString tracePath = dir_.filePath("ngram.jsonl");
    QSignalSpy exported(window.get(), &gbui::MainWindow::exported);
    window->exportTrace(tracePath, "jsonl");
    QVERIFY(exported.wait(10000));
    QCOMPARE(exported.front().at(1).toString(), QString());
    auto trace = gb::read_trace_jsonl(tracePath.toStdString());
    QVERIFY2(static_cast<bool>(trace), trace ? "" : trace.error().message.c_str());

    std::vector<qint64> drafted, accepted;
    int numVerifications = 0;
    for (const gb::TraceEvent& e : trace->events) {
      const auto* s = std::get_if<gb::SpeculativeEvent>(&e.body);
      if (!s) continue;
      QCOMPARE(s->request.value, specKey);
      QCOMPARE(s->drafter, std::string("ngram"));
      ++numVerifications;
      if (drafted.size() < s->drafted.size()) {
        drafted.resize(s->drafted.size(), 0);
        accepted.resize(s->drafted.size(), 0);
      }
      for (size_t i = 0; i < s->drafted.size(); ++i) {
        ++drafted[i];
        if (static_cast<int>(i) < s->num_accepted) ++accepted[i];
      }
    }
    QVERIFY2(numVerifications > 5, "the n-gram drafter should find matches in a 256-token story");
    QVERIFY(accepted[0] > 0);
    checkChart(*window, drafted, accepted);
    if (QTest::currentTestFailed()) return;
    const gbui::SpeculativePanel::Summary sum = window->speculativePanel()->summary();
    QCOMPARE(sum.numVerifications, static_cast<qint64>(numVerifications));
    QCOMPARE(sum.numSpecFinished, 1);
    QCOMPARE(sum.numPlainFinished, 1);
    QVERIFY(sum.speedup > 0.0);
    // Fewer target forwards than tokens: drafts were accepted.
    QVERIFY(sum.numSpecForwards < sum.numSpecTokens);
    QCOMPARE(sum.numSpecTokens, static_cast<qint64>(n));
    qInfo("ngram:n=2,k=4 on stories260K, %d tokens: %lld verifications, accepted %lld/%lld, mean accepted length "
          "%.2f, %lld target forwards, decode %.0f tok/s speculative vs %.0f tok/s plain (%.2fx)",
          n, static_cast<long long>(sum.numVerifications), static_cast<long long>(sum.accepted),
          static_cast<long long>(sum.drafted), sum.meanAcceptedLength, static_cast<long long>(sum.numSpecForwards),
          sum.specTokensPerSec, sum.plainTokensPerSec, sum.speedup);

    checkMarkers(*window, *trace, specKey);
    if (QTest::currentTestFailed()) return;

    // Replay: the same chart and markers from the file alone.
    auto replay = makeWindow(dir_);
    QSignalSpy ready(replay.get(), &gbui::MainWindow::traceReady);
    replay->openTrace(tracePath);
    QVERIFY(ready.wait(10000));
    checkChart(*replay, drafted, accepted);
    if (QTest::currentTestFailed()) return;
    QCOMPARE(replay->speculativePanel()->summary().numVerifications, static_cast<qint64>(numVerifications));
    // The replayed conversation lists both requests; show the speculative one.
    gbui::Conversation c;
    c.completionMode = true;
    c.turns.push_back({QStringLiteral("assistant"), QString(), {specKey}, 0});
    replay->chat()->setConversation(c);
    checkMarkers(*replay, *trace, specKey);
  }

  void draftModelStreamsPlainTokens() {
    const QString draft = sharedFile("models/stories260K/stories260K_L4_draft.bin");
    QVERIFY2(QFile::exists(draft), qPrintable("missing test data: " + draft));
    // A session of its own: the autosave of the test before (fallback=off)
    // would otherwise be restored into the drafter settings checked below.
    QTemporaryDir fresh;
    auto window = makeWindow(fresh);
    QVERIFY(loadStories(*window));
    QCOMPARE(window->sampling()->setSettingsJson(kGreedyJson), QString());
    gbui::SpeculativeSettings* spec = window->sampling()->speculative();
    spec->setMode(gbui::SpeculativeSettings::Mode::DraftModel);
    spec->setDraftPath(draft);
    spec->setK(3);
    QCOMPARE(spec->spec(), "draft:" + draft + ":k=3");
    QCOMPARE(spec->error(), QString());
    const int n = static_cast<int>(golden_.ids.size());
    QVERIFY(generate(*window, golden_.prompt, n));
    QCOMPARE(lastTokens(*window), golden_.ids);
    const gbui::RequestInfo* r =
        window->sessionModel()->request(window->chat()->conversation().turns.back().currentRequest());
    QVERIFY(r && r->lastVerification && r->numVerifications > 0);
    QCOMPARE(r->lastVerification->drafter, QString("draft"));
    QVERIFY(window->speculativePanel()->summary().accepted > 0);
    QVERIFY(window->lastError().isEmpty());
  }

  void selfDraftStreamsPlainTokens() {
    auto window = makeWindow(dir_);
    QVERIFY(loadStories(*window));
    QCOMPARE(window->sampling()->setSettingsJson(kGreedyJson), QString());
    QCOMPARE(window->sampling()->speculative()->setSpec("self:3:k=2"), QString());
    QCOMPARE(window->sampling()->speculative()->mode(), gbui::SpeculativeSettings::Mode::SelfDraft);
    const int n = static_cast<int>(golden_.ids.size());
    QVERIFY(generate(*window, golden_.prompt, n));
    QVERIFY2(window->lastError().isEmpty(), qPrintable(window->lastError()));
    QCOMPARE(lastTokens(*window), golden_.ids);
    const gbui::RequestInfo* r =
        window->sessionModel()->request(window->chat()->conversation().turns.back().currentRequest());
    QVERIFY(r && r->lastVerification && r->numVerifications > 0);
    QCOMPARE(r->lastVerification->drafter, QString("self"));
  }

  void otherVocabularyDraftIsRefusedAndAppStaysUsable() {
    const QString other = sharedFile("models/llama-2-tiny-random/llama-2-tiny-random.gguf");
    QVERIFY2(QFile::exists(other), qPrintable("missing test data: " + other));
    auto window = makeWindow(dir_);
    QVERIFY(loadStories(*window));
    // A syntax error is caught in the settings, with the parser's message.
    QVERIFY(!window->sampling()->speculative()->setSpec("ngram:n=x").isEmpty());
    QCOMPARE(window->sampling()->speculative()->setSpec("draft:" + other + ":k=3"), QString());
    gbui::Conversation c;
    c.completionMode = true;
    window->chat()->setConversation(c);
    window->chat()->setInputText("Once upon a time");
    window->chat()->send();
    QVERIFY(QTest::qWaitFor([&] { return !window->lastError().isEmpty(); }, 30000));
    QVERIFY2(window->lastError().contains("vocabulary"), qPrintable(window->lastError()));
    QVERIFY2(window->lastError().contains("llama-2-tiny-random.gguf"), qPrintable(window->lastError()));
    QVERIFY(window->findChild<QMessageBox*>("errorDialog"));
    QCOMPARE(window->chat()->activeRequest(), gbui::RequestKey(0));
    // No request reached the engine (the answers restored from the shared
    // session file are not the engine's).
    for (const auto& [key, r] : window->sessionModel()->requests()) QVERIFY(gbui::isRestoredKey(key));
    // Still usable: the same model generates once speculation is off.
    QCOMPARE(window->sampling()->speculative()->setSpec(QString()), QString());
    QCOMPARE(window->sampling()->setSettingsJson(kGreedyJson), QString());
    QVERIFY(generate(*window, golden_.prompt, 20));
    QCOMPARE(lastTokens(*window), std::vector<int>(golden_.ids.begin(), golden_.ids.begin() + 20));
  }

 private:
  void checkChart(gbui::MainWindow& window, const std::vector<qint64>& drafted, const std::vector<qint64>& accepted) {
    const QVector<double> bars = window.speculativePanel()->acceptanceBars();
    QCOMPARE(bars.size(), static_cast<qsizetype>(drafted.size()));
    for (size_t i = 0; i < drafted.size(); ++i)
      QCOMPARE(bars[static_cast<qsizetype>(i)], static_cast<double>(accepted[i]) / static_cast<double>(drafted[i]));
  }

  void checkMarkers(gbui::MainWindow& window, const gb::TraceFile& trace, gbui::RequestKey key) {
    gbui::TokenView* view = window.chat()->view();
    std::vector<const gb::TokenSampledEvent*> tokens;
    const gb::SpeculativeEvent* verification = nullptr;
    int numResampled = 0, numAccepted = 0;
    for (const gb::TraceEvent& e : trace.events) {
      if (const auto* s = std::get_if<gb::SpeculativeEvent>(&e.body); s && s->request.value == key) verification = s;
      const auto* t = std::get_if<gb::TokenSampledEvent>(&e.body);
      if (!t || t->request.value != key) continue;
      const int i = static_cast<int>(tokens.size());
      tokens.push_back(t);
      QVERIFY(i < view->numTokenSpans());
      QVERIFY(view->spanToken(i));
      QCOMPARE(view->spanToken(i)->tokenId, t->token);
      const QTextCharFormat f = view->spanFormat(i);
      // A token whose text starts with a line break opens a new paragraph: the
      // character after its start is the next block's, so there is no span
      // format to read (and nothing visible to underline).
      if (t->text.empty() || t->text.front() != '\n') QCOMPARE(f.underlineStyle(), expectedUnderline(t->origin));
      if (t->origin == gb::TokenOrigin::Accepted) ++numAccepted;
      if (t->origin == gb::TokenOrigin::Resampled) {
        ++numResampled;
        // The hover names the drafted token the target rejected, from the verification before it.
        QVERIFY(verification && verification->rejected);
        const QString tip = view->tooltipFor(*view->spanToken(i));
        QVERIFY2(tip.contains(QStringLiteral("id %1").arg(*verification->rejected)), qPrintable(tip));
        QVERIFY2(tip.contains("rejected") && tip.contains("resampled"), qPrintable(tip));
      }
    }
    QCOMPARE(view->numTokenSpans(), static_cast<int>(tokens.size()));
    // The model counted every verification but keeps only the latest.
    int numVerifications = 0;
    for (const gb::TraceEvent& e : trace.events)
      if (const auto* v = std::get_if<gb::SpeculativeEvent>(&e.body); v && v->request.value == key) ++numVerifications;
    const gbui::RequestInfo* r = window.sessionModel()->request(key);
    QVERIFY(r && r->lastVerification);
    QCOMPARE(r->numVerifications, numVerifications);
    QCOMPARE(r->lastVerification->step, static_cast<qint64>(verification->step));
    QVERIFY(numAccepted > 0);
    QVERIFY(numResampled > 0);
  }

  QTemporaryDir dir_;
  SpeculativeGolden golden_;
};

GB_QTEST_MAIN(UiSpeculativeTest);
#include "ui_speculative_test.moc"
