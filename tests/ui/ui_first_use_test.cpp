// What a new user hit in the window (issue #38), driven through the real
// window at 1400x900 by clicks and keys on its widgets, found by object name:
// - Send (in chat mode), then Regenerate three times: three new seeds and three different
//   texts (the seed box is not pinned); pinned, two regenerations repeat the
//   answer exactly.
// - Nothing moves when the first answer arrives: every button's and dock's
//   rectangle is the same before and after (the branch navigator has its room
//   from the start).
// - A base model (no chat template) opens in completion mode and the status
//   bar says why; a model with a template opens in chat mode.
// - Opening another model asks first (the conversation has branches), then
//   starts a new conversation: the chat is empty and the inspector shows no
//   stale token.
#include <QAbstractButton>
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QDockWidget>
#include <QLabel>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollArea>
#include <QSpinBox>
#include <QStatusBar>
#include <QTableWidget>
#include <map>
#include <set>

#include "gb_qtest_main.h"
#include "panels/token_inspector_panel.h"
#include "ui_test_support.h"

using namespace gbuitest;

namespace {

QString secondModelPath() { return sharedFile("models/tiny-qwen2/tiny-qwen2-F16.gguf"); }

template <class W = QWidget>
W* named(QWidget& root, const char* name) {
  W* w = root.findChild<W*>(QLatin1String(name));
  if (!w) qWarning("no widget named %s", name);
  return w;
}

// Window coordinates of every button and dock the user can see, and of those
// that keep their room while hidden (the branch navigator before the first
// answer). Docks in a tab not shown are left out (Qt keeps them off the
// window's area and lays them out when their tab is chosen).
std::map<QWidget*, QRect> layoutOf(QWidget& window) {
  std::map<QWidget*, QRect> out;
  QList<QWidget*> widgets;
  for (QAbstractButton* b : window.findChildren<QAbstractButton*>()) widgets << b;
  for (QDockWidget* d : window.findChildren<QDockWidget*>()) widgets << d;
  for (QWidget* w : widgets) {
    if (w->window() != &window) continue;  // dialogs and pop-ups are not the window's layout
    const bool keepsRoom = w->sizePolicy().retainSizeWhenHidden() && w->parentWidget() && w->parentWidget()->isVisible();
    if (!w->isVisible() && !keepsRoom) continue;
    const QRect rect(w->mapTo(&window, QPoint(0, 0)), w->size());
    if (!rect.intersects(window.rect())) continue;
    out[w] = rect;
  }
  return out;
}

// The Sampling panel's controls whose right edge is cut off by its dock (its
// scroll area never scrolls sideways): the spin boxes and the seed's pin.
QStringList clippedSamplingControls(QWidget& window) {
  QStringList out;
  auto* scroll = window.findChild<QScrollArea*>(QStringLiteral("samplingScroll"));
  if (!scroll) return {QStringLiteral("no samplingScroll")};
  QList<QWidget*> controls;
  for (QDoubleSpinBox* spin : scroll->findChildren<QDoubleSpinBox*>()) controls << spin;
  if (auto* pin = scroll->findChild<QCheckBox*>(QStringLiteral("pinSeed"))) controls << pin;
  for (QWidget* w : controls) {
    const int right = w->mapTo(scroll->viewport(), QPoint(w->width(), 0)).x();
    if (right > scroll->viewport()->width() || w->width() < w->minimumSizeHint().width())
      out << QStringLiteral("%1 (right edge %2 of %3, width %4 < %5)")
                 .arg(w->objectName())
                 .arg(right)
                 .arg(scroll->viewport()->width())
                 .arg(w->width())
                 .arg(w->minimumSizeHint().width());
  }
  return out;
}

QString describe(QWidget* w) {
  return QStringLiteral("%1 '%2' (%3)")
      .arg(QLatin1String(w->metaObject()->className()), w->objectName(),
           qobject_cast<QAbstractButton*>(w) ? qobject_cast<QAbstractButton*>(w)->text() : QString());
}

}  // namespace

class UiFirstUseTest : public QObject {
  Q_OBJECT

  bool waitIdle(int numBranches) {
    return QTest::qWaitFor(
        [&] {
          const gbui::Conversation& conv = window_->chat()->conversation();
          return !conv.turns.isEmpty() && conv.turns.back().branches.size() == numBranches &&
                 window_->chat()->activeRequest() == 0 && named<QPushButton>(*window_, "regenerate")->isEnabled();
        },
        60000);
  }

  // The shown answer's seed and text.
  std::pair<qint64, QString> shownAnswer() {
    const gbui::Turn& turn = window_->chat()->conversation().turns.back();
    const gbui::RequestInfo* r = window_->sessionModel()->request(turn.currentRequest());
    return r ? std::make_pair(r->seed, r->finish.text) : std::make_pair(qint64{-1}, QString());
  }

  bool openAndWait(const QString& path) {
    QSignalSpy ready(window_.get(), &gbui::MainWindow::modelReady);
    window_->openModel(path);
    // Asked first when the conversation has branches: answer Open.
    QTest::qWait(50);
    if (auto* box = window_->findChild<QMessageBox*>(QStringLiteral("newConversationDialog"))) {
      auto* open = box->findChild<QPushButton*>(QStringLiteral("confirmNewConversation"));
      if (!open) return false;
      QTest::mouseClick(open, Qt::LeftButton);
    }
    return ready.count() > 0 || ready.wait(30000);
  }

 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QApplication::setOrganizationName("GlassboxTestFirstUse");
    QVERIFY2(QFile::exists(storiesPath()), qPrintable("missing test data: " + storiesPath()));
    QVERIFY2(QFile::exists(secondModelPath()), qPrintable("missing test data: " + secondModelPath()));
    QVERIFY(dir_.isValid());
    window_ = makeWindow(dir_);
    QVERIFY(QTest::qWaitForWindowExposed(window_.get()));
  }

  void baseModelOpensInCompletionMode() {
    QVERIFY(openAndWait(storiesPath()));
    QVERIFY(window_->chat()->completionMode());
    QVERIFY2(window_->statusBar()->currentMessage().contains(QStringLiteral("no chat template")),
             qPrintable(window_->statusBar()->currentMessage()));
    // The default layout at 1400x900 leaves the Sampling panel room for its controls.
    QTest::qWait(100);
    const QStringList clipped = clippedSamplingControls(*window_);
    QVERIFY2(clipped.isEmpty(), qPrintable(clipped.join(QStringLiteral("; "))));
  }

  void firstAnswerMovesNothing() {
    QTest::qWait(100);  // the docks' first layout pass
    // The side docks as wide as they go (a user who widened them): the chat is
    // at its narrowest, so anything that widens it squeezes the docks.
    auto* sampling = named<QDockWidget>(*window_, "sampling");
    auto* inspector = named<QDockWidget>(*window_, "inspector");
    window_->resizeDocks({sampling, inspector}, {900, 900}, Qt::Horizontal);
    QTest::qWait(100);
    const std::map<QWidget*, QRect> before = layoutOf(*window_);
    QVERIFY(before.size() > 20);
    named<QSpinBox>(*window_, "maxTokens")->setValue(32);
    // Chat mode, as a new user has it on a model with a template (this one
    // falls back to a built-in format, with the warning line above the chat).
    named<QComboBox>(*window_, "chatMode")->setCurrentIndex(0);
    QVERIFY(!window_->chat()->completionMode());
    auto* input = named<QPlainTextEdit>(*window_, "chatInput");
    QTest::mouseClick(input->viewport(), Qt::LeftButton);
    QTest::keyClicks(input, QStringLiteral("Once upon a time"));
    QTest::mouseClick(named<QPushButton>(*window_, "send"), Qt::LeftButton);
    QVERIFY(waitIdle(1));
    QVERIFY(named<QWidget>(*window_, "copySeed")->isVisible());  // the navigator's part is shown now
    QTest::qWait(100);
    const std::map<QWidget*, QRect> after = layoutOf(*window_);
    int compared = 0;
    QStringList moved;
    for (const auto& [w, rect] : before) {
      auto it = after.find(w);
      if (it == after.end()) continue;
      ++compared;
      if (it->second != rect)
        moved << QStringLiteral("%1: (%2,%3 %4x%5) -> (%6,%7 %8x%9)")
                     .arg(describe(w))
                     .arg(rect.x()).arg(rect.y()).arg(rect.width()).arg(rect.height())
                     .arg(it->second.x()).arg(it->second.y())
                     .arg(it->second.width()).arg(it->second.height());
    }
    QVERIFY2(moved.isEmpty(), qPrintable(QStringLiteral("moved after the first answer:\n") + moved.join('\n')));
    const QStringList clipped = clippedSamplingControls(*window_);
    QVERIFY2(clipped.isEmpty(), qPrintable(clipped.join(QStringLiteral("; "))));
    QCOMPARE(compared, static_cast<int>(before.size()));
  }

  void regenerateDrawsNewSeedsUnlessPinned() {
    auto* regenerate = named<QPushButton>(*window_, "regenerate");
    auto* pin = named<QCheckBox>(*window_, "pinSeed");
    QVERIFY(!pin->isChecked());
    std::set<qint64> seeds{shownAnswer().first};
    std::set<QString> texts{shownAnswer().second};
    for (int i = 0; i < 3; ++i) {
      QTest::mouseClick(regenerate, Qt::LeftButton);
      QVERIFY(waitIdle(2 + i));
      const auto [seed, text] = shownAnswer();
      QVERIFY2(seeds.insert(seed).second, qPrintable(QStringLiteral("seed %1 again").arg(seed)));
      QVERIFY2(texts.insert(text).second, qPrintable(QStringLiteral("the same text again: %1").arg(text)));
      // The navigator and the seed box say which seed this answer used.
      QVERIFY(named<QLabel>(*window_, "branchLabel")->text().contains(QStringLiteral("seed %1").arg(seed)));
      QCOMPARE(qint64(named<QSpinBox>(*window_, "seed")->value()), seed);
    }
    QVERIFY(named<QLabel>(*window_, "branchLabel")->text().startsWith(QStringLiteral("4/4")));

    // Pinned: the same seed, the same answer.
    QTest::mouseClick(pin, Qt::LeftButton);
    QVERIFY(pin->isChecked());
    QTest::mouseClick(regenerate, Qt::LeftButton);
    QVERIFY(waitIdle(5));
    const auto first = shownAnswer();
    QTest::mouseClick(regenerate, Qt::LeftButton);
    QVERIFY(waitIdle(6));
    const auto second = shownAnswer();
    QCOMPARE(second.first, first.first);
    QCOMPARE(second.second, first.second);
    QCOMPARE(qint64(named<QSpinBox>(*window_, "seed")->value()), first.first);
    QTest::mouseClick(pin, Qt::LeftButton);  // unpinned again
  }

  void anotherModelStartsANewConversation() {
    // A token in the inspector, so there is something stale to clear.
    const gbui::Turn& turn = window_->chat()->conversation().turns.back();
    window_->sessionModel()->selectToken(turn.currentRequest(), 0);
    auto* table = named<QTableWidget>(*window_, "inspectorTable");
    QVERIFY(table->rowCount() > 0);
    QVERIFY(window_->chat()->hasBranches());

    QVERIFY(openAndWait(secondModelPath()));
    QVERIFY(window_->chat()->conversation().turns.isEmpty());
    QVERIFY(!window_->chat()->completionMode());  // it has a chat template
    QVERIFY(!named<QWidget>(*window_, "branchLabel")->isVisible());
    QVERIFY(!named<QWidget>(*window_, "copySeed")->isVisible());
    QVERIFY(named<QLabel>(*window_, "inspectorHeader")->text().contains(QStringLiteral("Click a generated token")));
    QCOMPARE(table->rowCount(), 0);
    QCOMPARE(table->columnCount(), 0);
    QVERIFY(!window_->sessionModel()->selectedToken());

    // Back to the base model: no branches now, so no question; completion mode again.
    QVERIFY(openAndWait(storiesPath()));
    QVERIFY(window_->chat()->completionMode());
    QVERIFY(window_->findChild<QMessageBox*>(QStringLiteral("newConversationDialog")) == nullptr);
  }

  void cleanupTestCase() { window_.reset(); }

 private:
  QTemporaryDir dir_;
  std::unique_ptr<gbui::MainWindow> window_;
};

GB_QTEST_MAIN(UiFirstUseTest);
#include "ui_first_use_test.moc"
