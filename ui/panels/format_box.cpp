// The Sampling panel's Format group (format_box.h).
#include "format_box.h"

#include <QComboBox>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QLabel>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QTextBlock>
#include <QTimer>
#include <QVBoxLayout>
#include <array>

namespace gbui {
namespace {

// The kinds the engine knows (FormatKind), as the settings JSON names them.
struct FormatKindRow {
  const char* name;
  const char* label;
  const char* placeholder;  // nullptr: the kind has no text
  const char* filter;       // the Load dialog's file filter
};
constexpr std::array<FormatKindRow, 5> kFormatKinds = {{
    {"none", QT_TRANSLATE_NOOP("gbui::FormatBox", "none"), nullptr, nullptr},
    {"json", QT_TRANSLATE_NOOP("gbui::FormatBox", "JSON (any object)"), nullptr, nullptr},
    {"json_schema", QT_TRANSLATE_NOOP("gbui::FormatBox", "JSON Schema"),
     QT_TRANSLATE_NOOP("gbui::FormatBox", "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}}, "
                                          "\"required\": [\"name\"]}"),
     QT_TRANSLATE_NOOP("gbui::FormatBox", "JSON Schema (*.json);;All files (*)")},
    {"gbnf", QT_TRANSLATE_NOOP("gbui::FormatBox", "GBNF grammar"),
     QT_TRANSLATE_NOOP("gbui::FormatBox", "root ::= \"yes\" | \"no\""),
     QT_TRANSLATE_NOOP("gbui::FormatBox", "GBNF grammar (*.gbnf);;All files (*)")},
    {"regex", QT_TRANSLATE_NOOP("gbui::FormatBox", "regex"),
     QT_TRANSLATE_NOOP("gbui::FormatBox", "[0-9]{3}-[0-9]{4}"),
     QT_TRANSLATE_NOOP("gbui::FormatBox", "Text (*.txt);;All files (*)")},
}};

constexpr int kCheckDelayMs = 300;  // after the last keystroke

const FormatKindRow& formatRow(const QString& name) {
  for (const FormatKindRow& row : kFormatKinds)
    if (name == QLatin1String(row.name)) return row;
  return kFormatKinds[0];
}

}  // namespace

FormatBox::FormatBox(const SettingsCodec& codec, QWidget* parent) : QWidget(parent), codec_(codec) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  auto* row = new QHBoxLayout;
  kind_ = new QComboBox;
  kind_->setObjectName(QStringLiteral("formatKind"));
  // As narrow as the dock: the Sampling panel never scrolls sideways.
  kind_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  kind_->setMinimumContentsLength(8);
  for (const FormatKindRow& r : kFormatKinds) kind_->addItem(tr(r.label), QString::fromLatin1(r.name));
  kind_->setToolTip(tr("The format the answer must follow: the grammar stage (first in the chain) removes every "
                       "token the format does not allow. Applies to new requests."));
  load_ = new QPushButton(tr("Load..."));
  load_->setObjectName(QStringLiteral("formatLoad"));
  load_->setToolTip(tr("Read the schema, grammar or pattern from a file"));
  auto* title = new QLabel(tr("Format"));
  title->setBuddy(kind_);
  row->addWidget(title);
  row->addWidget(kind_, 1);
  row->addWidget(load_);
  layout->addLayout(row);
  editor_ = new QPlainTextEdit;
  editor_->setObjectName(QStringLiteral("formatText"));
  editor_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  editor_->setLineWrapMode(QPlainTextEdit::NoWrap);
  editor_->setTabChangesFocus(true);
  editor_->setMinimumHeight(90);
  editor_->setMinimumWidth(60);
  editor_->setMaximumHeight(200);
  layout->addWidget(editor_);
  error_ = new QLabel;
  error_->setObjectName(QStringLiteral("formatError"));
  error_->setWordWrap(true);
  error_->setTextFormat(Qt::RichText);
  error_->setTextInteractionFlags(Qt::TextBrowserInteraction);
  layout->addWidget(error_);
  debounce_ = new QTimer(this);
  debounce_->setSingleShot(true);
  debounce_->setInterval(kCheckDelayMs);
  connect(debounce_, &QTimer::timeout, this, [this] { showCheck(false); });
  connect(kind_, &QComboBox::currentIndexChanged, this, &FormatBox::onKindChanged);
  connect(editor_, &QPlainTextEdit::textChanged, this, &FormatBox::onTextChanged);
  connect(error_, &QLabel::linkActivated, this, [this] {
    moveCursorToError();
    editor_->setFocus(Qt::OtherFocusReason);
  });
  connect(load_, &QPushButton::clicked, this, [this] {
    const FormatKindRow& r = formatRow(kind());
    const QString path = QFileDialog::getOpenFileName(this, tr("Load %1").arg(tr(r.label)), {},
                                                      r.filter ? tr(r.filter) : QString());
    if (path.isEmpty()) return;
    if (const QString error = loadFile(path); !error.isEmpty()) QMessageBox::warning(this, tr("Load format"), error);
  });
  onKindChanged();
}

QString FormatBox::kind() const { return kind_->currentData().toString(); }
QString FormatBox::text() const { return editor_->toPlainText(); }

QJsonObject FormatBox::json() const {
  if (kind() == QLatin1String("none")) return {};
  return QJsonObject{{QStringLiteral("kind"), kind()}, {QStringLiteral("text"), formatRow(kind()).placeholder ? text() : QString()}};
}

void FormatBox::setJson(const QJsonObject& format) {
  setFormat(format.value(QStringLiteral("kind")).toString(QStringLiteral("none")),
            format.value(QStringLiteral("text")).toString());
}

void FormatBox::setFormat(const QString& kindName, const QString& formatText) {
  updating_ = true;
  kind_->setCurrentIndex(std::max(0, kind_->findData(kindName)));  // unknown: none
  if (editor_->toPlainText() != formatText) editor_->setPlainText(formatText);
  updating_ = false;
  onKindChanged();  // the editor's look and a fresh check; no signal (the caller sets the settings)
  debounce_->stop();
  showCheck(false);
}

void FormatBox::onKindChanged() {
  const FormatKindRow& r = formatRow(kind());
  const bool hasText = r.placeholder != nullptr;
  editor_->setVisible(hasText);
  load_->setVisible(hasText);
  if (hasText) editor_->setPlaceholderText(tr(r.placeholder));
  if (updating_) return;
  showCheck(false);  // a kind change is one click: no need to wait
  emit formatChanged();
}

void FormatBox::onTextChanged() {
  if (updating_) return;
  debounce_->start();  // compile once the typing pauses
  emit formatChanged();
}

bool FormatBox::checkPending() const { return debounce_->isActive(); }

FormatCheck FormatBox::checkNow(bool moveCursor) {
  debounce_->stop();
  showCheck(moveCursor);
  return check_;
}

void FormatBox::showCheck(bool moveCursor) {
  const FormatKindRow& r = formatRow(kind());
  if (r.placeholder && text().trimmed().isEmpty()) {
    check_ = {};
    check_.error = tr("empty: write or load the %1").arg(tr(r.label));
  } else {
    check_ = codec_.checkFormat(kind(), text());
  }
  QList<QTextEdit::ExtraSelection> marks;
  const int pos = errorPosition();
  if (!check_.ok() && pos >= 0) {
    QTextEdit::ExtraSelection line;
    line.format.setBackground(QColor(255, 228, 228));
    line.format.setProperty(QTextFormat::FullWidthSelection, true);
    line.cursor = QTextCursor(editor_->document());
    line.cursor.setPosition(pos);
    marks << line;
    QTextEdit::ExtraSelection at;
    at.format.setBackground(QColor(240, 120, 120));
    at.format.setUnderlineStyle(QTextCharFormat::WaveUnderline);
    at.format.setUnderlineColor(QColor(200, 0, 0));
    at.cursor = QTextCursor(editor_->document());
    // The character at the position; at the end of a line or the text, the one before.
    at.cursor.setPosition(pos);
    if (at.cursor.atBlockEnd() && !at.cursor.atBlockStart()) at.cursor.movePosition(QTextCursor::Left);
    at.cursor.movePosition(QTextCursor::Right, QTextCursor::KeepAnchor);
    marks << at;
  }
  editor_->setExtraSelections(marks);
  if (kind() == QLatin1String("none")) {
    error_->clear();
    error_->setVisible(false);
  } else if (check_.ok()) {
    error_->setText(QStringLiteral("<span style='color:#2a7a3a'>%1</span>").arg(tr("\u2713 compiles")));
    error_->setVisible(true);
  } else {
    const QString where = check_.line > 0
                              ? QStringLiteral("<a href='#error'>%1</a>: ").arg(tr("line %1, column %2").arg(check_.line).arg(check_.column))
                              : QString();
    error_->setText(QStringLiteral("<span style='color:#b00000'>%1%2</span>").arg(where, check_.error.toHtmlEscaped()));
    error_->setVisible(true);
  }
  error_->setToolTip(check_.ok() ? QString() : check_.error);
  if (moveCursor) moveCursorToError();
}

int FormatBox::errorPosition() const {
  if (check_.offset < 0) return -1;
  // A byte offset into the UTF-8 text -> a position in the editor's UTF-16 text.
  const QByteArray utf8 = text().toUtf8();
  const int byte = std::min(check_.offset, static_cast<int>(utf8.size()));
  return static_cast<int>(QString::fromUtf8(utf8.left(byte)).size());
}

void FormatBox::moveCursorToError() {
  const int pos = errorPosition();
  if (check_.ok() || pos < 0 || !editor_->isVisible()) return;
  QTextCursor c = editor_->textCursor();
  c.setPosition(pos);
  editor_->setTextCursor(c);
  editor_->ensureCursorVisible();
}

QString FormatBox::loadFile(const QString& path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) return tr("%1: %2").arg(path, file.errorString());
  const QByteArray bytes = file.read(4 << 20);  // far above the compilers' limits; a wrong file stays small
  if (!file.atEnd()) return tr("%1: larger than 4 MiB; not a schema or grammar").arg(path);
  if (kind() == QLatin1String("none") || kind() == QLatin1String("json")) {
    // A file picked without a kind: guess from its name.
    const QString suffix = QFileInfo(path).suffix().toLower();
    kind_->setCurrentIndex(kind_->findData(suffix == QLatin1String("gbnf") ? QStringLiteral("gbnf")
                                            : suffix == QLatin1String("json") ? QStringLiteral("json_schema")
                                                                              : QStringLiteral("regex")));
  }
  editor_->setPlainText(QString::fromUtf8(bytes));
  checkNow();
  return {};
}

}  // namespace gbui
