// FormatBox: the Sampling panel's "Format" group, the constraint the output must
// follow (sampler settings' "format": the engine's grammar stage). A kind
// (none / any JSON / JSON Schema / GBNF / regex), the text of the schema,
// grammar or pattern (typed, pasted or loaded from a file), and the result of
// compiling it: the engine's compilers run through SettingsCodec::checkFormat
// (no engine header here) a moment after the last keystroke and again at
// submit (checkNow). An error is shown under the editor with its position
// ("line 3, column 7"), that line is highlighted and the character marked; at
// submit, or a click on the position, the cursor moves there.
// Invariant: kind() and text() are what settingsJson's "format" says; the check
// shown is for them once no check is pending.
// Threads: UI thread.
#pragma once

#include <QJsonObject>
#include <QWidget>

#include "session/settings_codec.h"

class QComboBox;
class QLabel;
class QPlainTextEdit;
class QPushButton;
class QTimer;

namespace gbui {

class FormatBox : public QWidget {
  Q_OBJECT
 public:
  explicit FormatBox(const SettingsCodec& codec, QWidget* parent = nullptr);

  // The format kind's JSON name: "none", "json", "json_schema", "gbnf", "regex".
  QString kind() const;
  QString text() const;
  // The "format" object of the sampler settings JSON; empty for none.
  QJsonObject json() const;
  // From sampler settings JSON's "format" (missing or empty: none). No signal.
  void setJson(const QJsonObject& format);
  void setFormat(const QString& kind, const QString& text);
  // Compiles now (a pending debounced check runs at once) and shows the result;
  // with moveCursor the editor's cursor goes to the error's position.
  FormatCheck checkNow(bool moveCursor = false);
  // The last check's result (what the box shows).
  const FormatCheck& lastCheck() const { return check_; }
  bool checkPending() const;
  // Reads a schema / grammar / pattern file into the editor; "" on success.
  QString loadFile(const QString& path);

  QComboBox* kindBox() const { return kind_; }
  QPlainTextEdit* editor() const { return editor_; }
  QLabel* errorLabel() const { return error_; }

 signals:
  void formatChanged();

 private:
  void onKindChanged();
  void onTextChanged();
  void showCheck(bool moveCursor);
  void moveCursorToError();
  // The editor's character position of the check's byte offset (-1: none).
  int errorPosition() const;

  const SettingsCodec& codec_;
  QComboBox* kind_;
  QPlainTextEdit* editor_;
  QPushButton* load_;
  QLabel* error_;
  QTimer* debounce_;
  FormatCheck check_;
  bool updating_ = false;
};

}  // namespace gbui
