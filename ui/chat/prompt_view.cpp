#include "prompt_view.h"

#include <QLabel>
#include <QPlainTextEdit>
#include <QSplitter>
#include <QTextBrowser>
#include <QUrl>
#include <QVBoxLayout>

namespace gbui {

PromptView::PromptView(QWidget* parent) : QDialog(parent) {
  setWindowTitle(tr("Prompt"));
  resize(760, 560);
  auto* layout = new QVBoxLayout(this);
  summary_ = new QLabel;
  warning_ = new QLabel;
  warning_->setWordWrap(true);
  warning_->setStyleSheet(QStringLiteral("color: #b35c00;"));
  text_ = new QPlainTextEdit;
  text_->setReadOnly(true);
  text_->setLineWrapMode(QPlainTextEdit::WidgetWidth);
  tokens_ = new QTextBrowser;
  tokens_->setOpenLinks(false);  // a token is a link to itself: a click picks it
  connect(tokens_, &QTextBrowser::anchorClicked, this, [this](const QUrl& url) {
    bool ok = false;
    const int position = url.toString().section(QLatin1Char(':'), 1).toInt(&ok);
    if (ok && url.scheme() == QStringLiteral("token")) pickToken(position);
  });
  auto* split = new QSplitter(Qt::Vertical);
  split->addWidget(text_);
  split->addWidget(tokens_);
  layout->addWidget(summary_);
  layout->addWidget(warning_);
  layout->addWidget(split, 1);
}

QString PromptView::countText(const UiChatPrompt& p) {
  int control = 0;
  for (bool c : p.control) control += c ? 1 : 0;
  const double pct = p.contextLength > 0 ? 100.0 * p.ids.size() / p.contextLength : 0.0;
  return tr("%1 tokens of %2 (%3%), %4 control").arg(p.ids.size()).arg(p.contextLength).arg(pct, 0, 'f', 1).arg(control);
}

QString PromptView::displayPiece(const QString& piece, bool control) {
  if (control) return piece;
  QString s = piece;
  s.replace(QChar(0x2581), QChar(0x00B7));  // SentencePiece space
  s.replace(QChar(0x0120), QChar(0x00B7));  // byte-level BPE space (Ġ)
  s.replace(QChar(0x010A), QChar(0x21B5));  // byte-level BPE newline (Ċ)
  s.replace(QLatin1Char(' '), QChar(0x00B7));
  s.replace(QLatin1Char('\n'), QChar(0x21B5));
  s.replace(QLatin1Char('\t'), QChar(0x2192));
  return s;
}

void PromptView::setPrompt(const UiChatPrompt& p) {
  summary_->setText(tr("Format: %1 \u2014 %2").arg(p.format, countText(p)));
  warning_->setText(p.warning);
  warning_->setVisible(!p.warning.isEmpty());
  text_->setPlainText(p.text);
  QString html = QStringLiteral("<div style='font-family: monospace; line-height: 160%;'>");
  for (int i = 0; i < p.ids.size(); ++i) {
    const bool control = p.control.value(i);
    const QString bg = control ? QStringLiteral("#f4b6b6") : (i % 2 ? QStringLiteral("#e4ecf7") : QStringLiteral("#eef3e4"));
    const QString weight = control ? QStringLiteral("bold") : QStringLiteral("normal");
    html += QStringLiteral("<a href='token:%5' style='text-decoration: none; color: black;'>"
                           "<span title='id %1 (click: inside the model here)' style='background:%2; font-weight:%3;'>%4</span></a> ")
                .arg(p.ids[i])
                .arg(bg, weight, displayPiece(p.pieces.value(i), control).toHtmlEscaped())
                .arg(i);
  }
  html += QStringLiteral("</div>");
  tokens_->setHtml(html);
}

QString PromptView::summaryText() const { return summary_->text(); }
QString PromptView::promptText() const { return text_->toPlainText(); }
QString PromptView::tokensHtml() const { return tokens_->toHtml(); }

}  // namespace gbui
