#include "connect_dialog.h"

#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>

namespace gbui {

ConnectDialog::ConnectDialog(const QString& url, QWidget* parent) : QDialog(parent) {
  setWindowTitle(tr("Connect to server"));
  auto* form = new QFormLayout(this);
  auto* about = new QLabel(tr("Use an OpenAI-compatible server (another Glassbox, llama-server, vLLM) as the engine. "
                              "Tokens stream with their top 20 alternatives; its /metrics, if any, feed the KV and "
                              "performance panels. Token ids, sampler stages and the block map are not available "
                              "over the API."));
  about->setWordWrap(true);
  form->addRow(about);
  url_ = new QLineEdit(url.isEmpty() ? QStringLiteral("http://127.0.0.1:8080/v1") : url);
  url_->setObjectName(QStringLiteral("connectUrl"));
  key_ = new QLineEdit;
  key_->setObjectName(QStringLiteral("connectApiKey"));
  key_->setEchoMode(QLineEdit::Password);
  key_->setPlaceholderText(tr("optional"));
  form->addRow(tr("URL"), url_);
  form->addRow(tr("API key"), key_);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel);
  buttons->button(QDialogButtonBox::Ok)->setText(tr("Connect"));
  connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  form->addRow(buttons);
  resize(520, sizeHint().height());
}

QString ConnectDialog::url() const { return url_->text().trimmed(); }
QString ConnectDialog::apiKey() const { return key_->text(); }

}  // namespace gbui
