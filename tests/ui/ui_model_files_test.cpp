// The recent-models menu and the open-model dialog show each file's weight mix
// ("name — Q4_K_M, 4.6 bpw, 6.2 MiB") from its header alone; a file that cannot
// be read shows a short error. Expected figures are worked out here from the
// quant-llama config and tensor-type counts in its README (written from gguf-py),
// not from our reader.
#include <QApplication>
#include <QFile>
#include <QMenu>
#include <QSettings>
#include <QSignalSpy>
#include <QTreeWidget>

#include "window/main_window.h"
#include "panels/model_info_panel.h"

#include "gb_qtest_main.h"
#include "bridge/model_file_summary.h"
#include "window/model_file_dialog.h"
#include "ui_test_support.h"

using namespace gbuitest;

namespace {

// quant-llama (README "Config"): vocab 32000, hidden 256, intermediate 768, 4
// layers, 4 of 8 heads for K/V (head_dim 32), tied output, F32 norms.
constexpr double kVocabValues = 32000.0 * 256;
constexpr double kQO = 256.0 * 256, kKV = 256.0 * 128, kFfn = 256.0 * 768, kLayers = 4;
constexpr double kNormValues = kLayers * 2 * 256 + 256;  // the 9 F32 tensors
constexpr double kMatrixValues = kVocabValues + kLayers * (2 * kQO + 2 * kKV + 3 * kFfn);

QString expectedLine(const QString& file, const char* mix, double weightBytes) {
  const double bpw = 8.0 * weightBytes / (kMatrixValues + kNormValues);
  return QStringLiteral("%1 — %2, %3 bpw, %4 MiB")
      .arg(file, QLatin1String(mix))
      .arg(bpw, 0, 'f', 1)
      .arg(weightBytes / (1024.0 * 1024.0), 0, 'f', 1);
}

// F16 matrices, F32 norms.
double f16Bytes() { return 2 * kMatrixValues + 4 * kNormValues; }

// README: "F32 x9, Q4_K x25, Q6_K x4". llama-quantize's Q4_K_M gives attn_v and
// ffn_down Q6_K in the layers where use_more_bits(i, 4) holds (i = 0 and 2);
// Q4_K is 144 bytes per 256 values, Q6_K 210.
double q4kmBytes() {
  const double q6 = 2 * (kKV + kFfn);
  const double q4 = kMatrixValues - q6;
  return q4 * 144 / 256 + q6 * 210 / 256 + 4 * kNormValues;
}

}  // namespace

class UiModelFilesTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    QStandardPaths::setTestModeEnabled(true);
    QApplication::setOrganizationName("GlassboxTest");
    QVERIFY(dir_.isValid());
    for (const QString& p : {q4km(), f16()}) QVERIFY2(QFile::exists(p), qPrintable("missing test data: " + p));
    QFile junk(dir_.filePath("junk.gguf"));
    QVERIFY(junk.open(QIODevice::WriteOnly));
    junk.write("GGUF\x03\x00\x00\x00truncated");
  }

  void recentMenuShowsTypeMix() {
    const QString junk = dir_.filePath("junk.gguf"), missing = dir_.filePath("missing.gguf");
    QSettings().setValue("recentModels", QStringList{q4km(), f16(), storiesPath(), junk, missing});
    auto window = makeWindow(dir_);
    auto* menu = window->findChild<QMenu*>("menuRecent");
    QVERIFY(menu);
    const auto actions = menu->actions();
    QCOMPARE(actions.size(), 5);
    QCOMPARE(actions[0]->text(), expectedLine("quant-llama-Q4_K_M.gguf", "Q4_K_M", q4kmBytes()));
    QCOMPARE(actions[0]->text(), QStringLiteral("quant-llama-Q4_K_M.gguf — Q4_K_M, 4.6 bpw, 6.2 MiB"));
    QCOMPARE(actions[1]->text(), expectedLine("quant-llama-F16.gguf", "F16", f16Bytes()));
    QVERIFY2(actions[2]->text().startsWith("stories260K.bin — F32 (llama2.c), "), qPrintable(actions[2]->text()));
    QVERIFY2(actions[3]->text().startsWith("junk.gguf — cannot read: "), qPrintable(actions[3]->text()));
    QVERIFY2(actions[4]->text().startsWith("missing.gguf — cannot read: "), qPrintable(actions[4]->text()));
    QCOMPARE(actions[0]->data().toString(), q4km());
    QSettings().remove("recentModels");
  }

  void openDialogPreviewsTheCurrentFile() {
    gbui::ModelFileDialog dialog;
    dialog.setDirectory(QFileInfo(q4km()).absolutePath());
    dialog.show();
    dialog.selectFile(q4km());
    QTRY_COMPARE_WITH_TIMEOUT(dialog.previewText(), expectedLine("quant-llama-Q4_K_M.gguf", "Q4_K_M", q4kmBytes()), 10000);
    dialog.selectFile(f16());
    QTRY_COMPARE_WITH_TIMEOUT(dialog.previewText(), expectedLine("quant-llama-F16.gguf", "F16", f16Bytes()), 10000);
  }

  // Engine > BF16 matmuls: off by default; chosen, it is remembered, applies
  // to the next model opened, and the model panel says what the CPU runs
  // (an F16 file's matrices rounded to bf16, or exact).
  void bf16MatmulsApplyToTheNextLoad() {
    QSettings().remove("engine/bf16Matmuls");
    for (const bool on : {false, true}) {
      auto window = makeWindow(dir_);
      auto* action = window->findChild<QAction*>("actionBf16Matmuls");
      QVERIFY(action && action->isCheckable());
      QCOMPARE(action->isChecked(), false);  // the default, and after the `false` round's reset below
      if (on) {
        action->trigger();
        QVERIFY(window->bf16Matmuls());
        QCOMPARE(QSettings().value("engine/bf16Matmuls").toBool(), true);
      }
      QSignalSpy ready(window.get(), &gbui::MainWindow::modelReady);
      window->openModel(f16());
      QVERIFY(ready.wait(30000));
      const QString want = on ? QStringLiteral("bf16") : QStringLiteral("exact");
      const auto rows = window->modelInfo()->tree()->findItems(QStringLiteral("float matmuls"),
                                                                Qt::MatchExactly | Qt::MatchRecursive);
      QCOMPARE(rows.size(), 1);
      QVERIFY2(rows[0]->text(1).startsWith(want), qPrintable(rows[0]->text(1)));
      if (on) {
        auto again = makeWindow(dir_);  // a new window reads the choice back
        QVERIFY(again->findChild<QAction*>("actionBf16Matmuls")->isChecked());
        again->findChild<QAction*>("actionBf16Matmuls")->trigger();
        QCOMPARE(QSettings().value("engine/bf16Matmuls").toBool(), false);
      }
    }
  }

 private:
  static QString q4km() { return sharedFile("models/quant-llama/quant-llama-Q4_K_M.gguf"); }
  static QString f16() { return sharedFile("models/quant-llama/quant-llama-F16.gguf"); }
  QTemporaryDir dir_;
};

GB_QTEST_MAIN(UiModelFilesTest);
#include "ui_model_files_test.moc"
