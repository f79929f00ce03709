// The workbench's side of formats (issue #40), without a model: the Sampling
// panel's Format box writes the sampler settings' "format" and reads it back
// from a preset; a broken grammar, schema or pattern shows the compiler's error
// at its position (debounced while typing, at once at submit); and the panels
// show a token's grammar record: the inspector's removed candidates, removed
// mass, "forced" and state, the chat's forced colour and legend, and the
// Performance panel's mass-removed series. The tokens are synthetic UiTokens
// delivered through SessionModel as the engine's events are.
#include <QComboBox>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QPlainTextEdit>
#include <QSignalSpy>
#include <QTest>
#include <QTableWidget>
#include <QTextBlock>
#include <cmath>
#include <memory>
#include <qcustomplot.h>

#include "bridge/engine_settings_codec.h"
#include "chat/chat_panel.h"
#include "chat/token_view.h"
#include "gb_qtest_main.h"
#include "panels/format_box.h"
#include "panels/performance_panel.h"
#include "panels/sampling_panel.h"
#include "panels/token_inspector_panel.h"
#include "sampling/sampler_settings.h"
#include "session/session_model.h"

namespace {

constexpr gbui::RequestKey kFormatRequest = 5;

// Token `index` of a request with a format: the grammar stage first (of 262,144
// candidates it keeps `numAllowed`), then top_k 40. Forced tokens keep one.
gbui::UiToken grammarToken(int index, int numAllowed, float massAllowed) {
  gbui::UiToken t;
  t.request = kFormatRequest;
  t.index = index;
  t.position = 10 + index;
  t.tokenId = 200 + index;
  t.text = t.piece = numAllowed == 1 ? QStringLiteral("{\"") : QStringLiteral("abc");
  t.stages = {QStringLiteral("grammar"), QStringLiteral("top_k")};
  t.stageActive = {true, true};
  t.numCandidatesBefore = 262144;
  t.numAfterStage = {numAllowed, std::min(numAllowed, 40)};
  t.prob = numAllowed == 1 ? 1.0f : 0.4f;
  t.probBefore = numAllowed == 1 ? 0.02f : 0.3f;
  t.rank = 0;
  for (int c = 0; c < 3; ++c) {
    gbui::UiCandidate cand;
    cand.id = c == 0 ? t.tokenId : 900 + c;
    cand.text = c == 0 ? t.text : QStringLiteral("alt%1").arg(c);
    cand.probBefore = 0.3f / static_cast<float>(c + 1);
    const bool allowed = c == 0 || numAllowed > 1;
    cand.probAfter = {allowed ? 0.5f : 0.0f, allowed ? 0.5f : 0.0f};
    cand.removedByStage = allowed ? -1 : 0;
    t.top.push_back(cand);
  }
  auto g = std::make_shared<gbui::UiGrammarInfo>();
  g->massAllowed = massAllowed;
  g->numAllowed = numAllowed;
  g->state = QStringLiteral("root: object @ '{'");
  t.grammar = g;
  return t;
}

gbui::UiToken plainToken(gbui::RequestKey request, int index) {
  gbui::UiToken t;
  t.request = request;
  t.index = index;
  t.tokenId = 300 + index;
  t.text = t.piece = QStringLiteral(" word");
  t.prob = 0.6f;
  t.probBefore = 0.6f;
  return t;
}

}  // namespace

class UiFormatTest : public QObject {
  Q_OBJECT

  std::unique_ptr<gbui::SessionModel> model_;
  quint64 seq_ = 1;

  void apply(std::vector<gbui::UiEvent> events) {
    for (gbui::UiEvent& e : events) e.seq = seq_++;
    model_->apply(std::make_shared<const std::vector<gbui::UiEvent>>(std::move(events)));
  }

  // A request with a format: a forced token, two free ones (one where the
  // model wanted to leave the format), then its end.
  void deliverFormatRequest(gbui::RequestKey key = kFormatRequest) {
    gbui::UiSubmitted sub;
    sub.request = key;
    sub.promptIds = {1, 2, 3};
    apply({{0, 0, sub}});
    std::vector<gbui::UiEvent> tokens;
    for (gbui::UiToken t : {grammarToken(0, 1, 0.25f), grammarToken(1, 9000, 0.999f), grammarToken(2, 120, 0.4f)}) {
      t.request = key;
      tokens.push_back({0, 1000 * (t.index + 1), t});
    }
    apply(std::move(tokens));
    gbui::UiFinished done;
    done.request = key;
    done.reason = QStringLiteral("stop");
    done.numGenerated = 3;
    apply({{0, 5000, done}});
  }

 private slots:
  void init() {
    model_ = std::make_unique<gbui::SessionModel>();
    seq_ = 1;
  }

  void formatBoxSetsSettingsFormat() {
    gbui::SamplingPanel panel(gbui::engineSettingsCodec());
    gbui::FormatBox* box = panel.format();
    QVERIFY(box);
    // None by default: the settings carry no format and the editor is hidden.
    QVERIFY(panel.choice().ok());
    QCOMPARE(panel.choice().settings->format.kind, gb::FormatKind::None);
    QVERIFY(!panel.settingsJson().contains(QStringLiteral("\"format\"")));
    QSignalSpy changed(&panel, &gbui::SamplingPanel::settingsChanged);
    box->kindBox()->setCurrentIndex(box->kindBox()->findData(QStringLiteral("gbnf")));
    QVERIFY(!changed.isEmpty());
    const QString grammar = QStringLiteral("root ::= \"yes\" | \"no\"\n");
    box->editor()->setPlainText(grammar);
    gbui::SamplerChoice choice = panel.choice();
    QVERIFY2(choice.ok(), qPrintable(choice.error));
    QCOMPARE(choice.settings->format.kind, gb::FormatKind::Gbnf);
    QCOMPARE(QString::fromStdString(choice.settings->format.text), grammar);
    QVERIFY(box->checkNow().ok());
    QVERIFY(box->errorLabel()->text().contains(QStringLiteral("compiles")));

    // Any JSON: a kind without text.
    box->kindBox()->setCurrentIndex(box->kindBox()->findData(QStringLiteral("json")));
    QVERIFY(box->editor()->isHidden());
    QCOMPARE(panel.choice().settings->format.kind, gb::FormatKind::Json);
    QVERIFY(box->checkNow().ok());

    // A preset with a JSON Schema sets the box; the panel's JSON carries it back.
    const QString schema = QStringLiteral(R"({"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]})");
    QJsonObject preset = QJsonDocument::fromJson(panel.settingsJson().toUtf8()).object();
    preset.insert(QStringLiteral("format"), QJsonObject{{"kind", "json_schema"}, {"text", schema}});
    QCOMPARE(panel.setSettingsJson(QString::fromUtf8(QJsonDocument(preset).toJson())), QString());
    QCOMPARE(box->kind(), QStringLiteral("json_schema"));
    QCOMPARE(box->text(), schema);
    QVERIFY(box->lastCheck().ok());
    choice = panel.choice();
    QCOMPARE(choice.settings->format.kind, gb::FormatKind::JsonSchema);
    QCOMPARE(QString::fromStdString(choice.settings->format.text), schema);
    // Defaults: back to none.
    panel.resetDefaults();
    QCOMPARE(box->kind(), QStringLiteral("none"));
    QCOMPARE(panel.choice().settings->format.kind, gb::FormatKind::None);
  }

  void gbnfErrorShowsItsPosition() {
    gbui::SamplingPanel panel(gbui::engineSettingsCodec());
    panel.resize(400, 900);
    panel.show();
    gbui::FormatBox* box = panel.format();
    box->kindBox()->setCurrentIndex(box->kindBox()->findData(QStringLiteral("gbnf")));
    // It fits the Sampling dock at its usual width, about 300 px (the panel never scrolls sideways).
    QVERIFY2(box->minimumSizeHint().width() <= 280, qPrintable(QString::number(box->minimumSizeHint().width())));
    // Line 3 names a rule that does not exist; typing waits for a pause before compiling.
    const QString bad = QStringLiteral("root ::= greeting \" \" name\ngreeting ::= \"hi\" | \"hello\"\nname ::= wrd\n");
    box->editor()->setPlainText(bad);
    QVERIFY(box->checkPending());
    QVERIFY(QTest::qWaitFor([&] { return !box->checkPending(); }, 5000));
    const gbui::FormatCheck check = box->lastCheck();
    QVERIFY(!check.ok());
    QVERIFY2(check.error.contains(QStringLiteral("wrd")), qPrintable(check.error));
    QCOMPARE(check.line, 3);
    QCOMPARE(check.column, 10);  // "name ::= wrd": the undefined name
    QVERIFY(box->errorLabel()->isVisible());
    QVERIFY2(box->errorLabel()->text().contains(QStringLiteral("line 3, column 10")), qPrintable(box->errorLabel()->text()));
    // The error's line is highlighted in the editor and its character marked.
    const QList<QTextEdit::ExtraSelection> marks = box->editor()->extraSelections();
    QCOMPARE(marks.size(), 2);
    QCOMPARE(marks[0].cursor.block().blockNumber(), 2);
    QCOMPARE(marks[1].cursor.selectedText(), QStringLiteral("w"));
    // Submitting moves the cursor to the error (and the request still goes out: the engine refuses it).
    const gbui::SamplerChoice choice = panel.submitChoice();
    QVERIFY(choice.ok());
    QCOMPARE(box->editor()->textCursor().blockNumber(), 2);
    QCOMPARE(box->editor()->textCursor().positionInBlock(), 9);
    // Fixed: the error goes away.
    box->editor()->setPlainText(QStringLiteral("root ::= \"hi\" \" \" [a-z]+\n"));
    QVERIFY(box->checkNow().ok());
    QVERIFY(box->editor()->extraSelections().isEmpty());
  }

  void schemaAndRegexErrors() {
    gbui::FormatBox box(gbui::engineSettingsCodec());
    // Not JSON: the parser's position (line 3: the missing value).
    box.setFormat(QStringLiteral("json_schema"), QStringLiteral("{\n  \"type\": \"object\",\n  \"properties\": }\n"));
    QVERIFY(!box.lastCheck().ok());
    QCOMPARE(box.lastCheck().line, 3);
    QVERIFY(box.lastCheck().offset > 0);
    // JSON, but a keyword the compiler refuses: named, without a position.
    box.setFormat(QStringLiteral("json_schema"), QStringLiteral(R"({"type":"string","not":{"const":"x"}})"));
    QVERIFY(!box.lastCheck().ok());
    QVERIFY2(box.lastCheck().error.contains(QStringLiteral("not")), qPrintable(box.lastCheck().error));
    // A regex with a lookahead: its offset.
    box.setFormat(QStringLiteral("regex"), QStringLiteral("ab(?=c)"));
    QVERIFY(!box.lastCheck().ok());
    QCOMPARE(box.lastCheck().line, 1);
    QVERIFY(box.lastCheck().column >= 3);
    box.setFormat(QStringLiteral("regex"), QStringLiteral("[0-9]{3}-[0-9]{4}"));
    QVERIFY(box.lastCheck().ok());
    // Empty text is refused before the engine sees it; none is always fine.
    box.setFormat(QStringLiteral("gbnf"), QString());
    QVERIFY(!box.lastCheck().ok());
    box.setFormat(QStringLiteral("none"), QString());
    QVERIFY(box.lastCheck().ok());
    QVERIFY(box.errorLabel()->isHidden());
  }

  void inspectorShowsRemovedMassAndForced() {
    gbui::TokenInspectorPanel inspector(model_.get());
    deliverFormatRequest();
    model_->selectToken(kFormatRequest, 0);
    QLabel* g = inspector.grammarLabel();
    QVERIFY(!g->isHidden());
    // Forced: 262,144 candidates, one allowed; the model gave 75% to the others.
    QVERIFY2(g->text().contains(QStringLiteral("removed 262143 of 262144 candidates")), qPrintable(g->text()));
    QVERIFY2(g->text().contains(QStringLiteral("75.0%")), qPrintable(g->text()));
    QVERIFY(g->text().contains(QStringLiteral("forced")));
    QVERIFY(g->text().contains(QStringLiteral("root: object @ &#x27;{&#x27;")) ||
            g->text().contains(QStringLiteral("root: object @ '{'")));
    // The table has the grammar column, its header explained.
    QTableWidget* table = inspector.table();
    QCOMPARE(table->horizontalHeaderItem(4)->text(), QStringLiteral("grammar"));
    QVERIFY(table->horizontalHeaderItem(4)->toolTip().contains(QStringLiteral("format forbids")));
    QCOMPARE(table->item(1, 4 + 2)->text(), QStringLiteral("grammar"));  // removed by
    // A free token: not forced, 0.1% removed.
    model_->selectToken(kFormatRequest, 1);
    QVERIFY(!g->text().contains(QStringLiteral("forced")));
    QVERIFY2(g->text().contains(QStringLiteral("removed 253144 of 262144")), qPrintable(g->text()));
    QVERIFY2(g->text().contains(QStringLiteral("0.1%")), qPrintable(g->text()));
    // A request without a format: no grammar line.
    gbui::UiSubmitted sub;
    sub.request = 9;
    apply({{0, 0, sub}, {0, 0, plainToken(9, 0)}});
    model_->selectToken(9, 0);
    QVERIFY(g->isHidden());
  }

  void chatColoursForcedTokens() {
    gbui::TokenView view;
    const gbui::UiToken forced = grammarToken(0, 1, 0.25f), free = grammarToken(1, 9000, 0.999f);
    const gbui::UiToken plain = plainToken(kFormatRequest, 2);
    for (const gbui::UiToken* t : {&forced, &free, &plain}) view.appendToken(*t);
    // Forced is blue in every colour mode; the others keep the probability scale.
    QCOMPARE(view.spanColor(0), gbui::TokenView::forcedColor());
    QVERIFY(view.spanColor(1) != gbui::TokenView::forcedColor());
    QVERIFY(view.spanColor(2) != gbui::TokenView::forcedColor());
    for (gbui::ColorMode mode : {gbui::ColorMode::Entropy, gbui::ColorMode::Rank}) {
      view.setColorMode(mode);
      QCOMPARE(view.colorFor(forced), gbui::TokenView::forcedColor());
      QVERIFY(view.colorFor(free) != gbui::TokenView::forcedColor());
    }
    QVERIFY(view.tooltipFor(forced).contains(QStringLiteral("forced by the format")));
    QVERIFY(view.tooltipFor(free).contains(QStringLiteral("9000 tokens allowed")));
    QVERIFY(!view.tooltipFor(plain).contains(QStringLiteral("format")));

    // In the chat: the legend appears with the first forced token.
    gbui::ChatPanel chat(model_.get());
    chat.resize(600, 500);
    chat.show();
    auto* legend = chat.findChild<QLabel*>(QStringLiteral("forcedLegend"));
    QVERIFY(legend);
    QVERIFY(legend->isHidden());
    quint64 tag = 0;
    connect(&chat, &gbui::ChatPanel::generate, this, [&tag](const gbui::TurnCommand& turn) { tag = turn.tag; });
    chat.setInputText(QStringLiteral("Give me JSON"));
    chat.send();
    QVERIFY(tag != 0);
    chat.onRequestSubmitted(tag, kFormatRequest);
    deliverFormatRequest();
    QCOMPARE(chat.view()->numTokenSpans(), 3);
    QCOMPARE(chat.view()->spanColor(0), gbui::TokenView::forcedColor());
    QVERIFY(!legend->isHidden());
    QVERIFY(legend->toolTip().contains(QStringLiteral("forced")));
  }

  void performanceShowsMassRemoved() {
    gbui::PerformancePanel perf(model_.get());
    perf.resize(1200, 300);
    perf.show();
    QVERIFY(perf.massRemovedPlot()->isHidden());
    // Without a format: no series.
    gbui::UiSubmitted sub;
    sub.request = 9;
    apply({{0, 0, sub}, {0, 100, plainToken(9, 0)}, {0, 200, plainToken(9, 1)}});
    QCOMPARE(perf.numLatencyPoints(), 2);
    QCOMPARE(perf.numMassRemovedPoints(), 0);
    QVERIFY(perf.massRemovedPlot()->isHidden());
    // With one: a point per token, 1 - massAllowed, on the latency chart's token index.
    deliverFormatRequest();
    QCOMPARE(perf.numMassRemovedPoints(), 3);
    QVERIFY(perf.massRemovedPlot()->isVisible());
    auto data = perf.massRemovedPlot()->graph(0)->data();
    QCOMPARE(data->at(0)->key, 2.0);
    QCOMPARE(data->at(0)->value, 1.0 - 0.25);
    QVERIFY(std::abs(data->at(1)->value - 0.001) < 1e-6);
    QVERIFY(std::abs(data->at(2)->value - 0.6) < 1e-6);
    QVERIFY(perf.csv().contains(QStringLiteral("token,grammar_mass_removed")));
    // A new session clears and hides it.
    perf.reset();
    QVERIFY(perf.massRemovedPlot()->isHidden());
    QCOMPARE(perf.numMassRemovedPoints(), 0);
  }
};

GB_QTEST_MAIN(UiFormatTest);
#include "ui_format_test.moc"
