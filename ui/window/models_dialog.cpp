#include "models_dialog.h"

#include <QDesktopServices>
#include <QDir>
#include <QFile>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QTableWidget>
#include <QUrl>
#include <QVBoxLayout>

namespace gbui {
namespace {
QString mib(qint64 bytes) { return QStringLiteral("%1 MiB").arg(static_cast<double>(bytes) / (1 << 20), 0, 'f', 1); }
}  // namespace

ModelsDialog::ModelsDialog(const QString& dir, QWidget* parent)
    : QDialog(parent), dir_(dir.isEmpty() ? ModelLibrary::defaultDir() : dir), library_(new ModelLibrary(this)) {
  setWindowTitle(tr("Models"));
  setObjectName(QStringLiteral("modelsDialog"));
  resize(820, 420);
  auto* layout = new QVBoxLayout(this);
  auto* where = new QLabel(tr("Models folder: %1").arg(dir_));
  where->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(where);
  table_ = new QTableWidget;
  table_->setObjectName(QStringLiteral("modelsTable"));
  table_->setColumnCount(6);
  table_->setHorizontalHeaderLabels({tr("File"), tr("Architecture"), tr("Weights"), tr("Context"), tr("Size"), tr("Fits here")});
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->verticalHeader()->setVisible(false);
  table_->horizontalHeader()->setStretchLastSection(true);
  layout->addWidget(table_, 1);
  auto* row = new QHBoxLayout;
  open_ = new QPushButton(tr("Open"));
  open_->setObjectName(QStringLiteral("modelsOpen"));
  auto* reveal = new QPushButton(tr("Show folder"));
  reveal->setObjectName(QStringLiteral("modelsReveal"));
  delete_ = new QPushButton(tr("Delete..."));
  delete_->setObjectName(QStringLiteral("modelsDelete"));
  row->addWidget(open_);
  row->addWidget(reveal);
  row->addWidget(delete_);
  row->addStretch(1);
  layout->addLayout(row);
  auto* get = new QHBoxLayout;
  spec_ = new QLineEdit;
  spec_->setObjectName(QStringLiteral("modelsSpec"));
  spec_->setPlaceholderText(tr("OWNER/NAME[:FILE.gguf] on Hugging Face, or an https:// URL"));
  download_ = new QPushButton(tr("Download"));
  download_->setObjectName(QStringLiteral("modelsDownload"));
  cancel_ = new QPushButton(tr("Cancel"));
  cancel_->setObjectName(QStringLiteral("modelsCancel"));
  cancel_->setEnabled(false);
  get->addWidget(spec_, 1);
  get->addWidget(download_);
  get->addWidget(cancel_);
  layout->addLayout(get);
  progress_ = new QProgressBar;
  progress_->setObjectName(QStringLiteral("modelsProgress"));
  progress_->setVisible(false);
  layout->addWidget(progress_);
  status_ = new QLabel;
  status_->setObjectName(QStringLiteral("modelsStatus"));
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(status_);

  connect(open_, &QPushButton::clicked, this, [this] {
    if (const QString p = selectedPath(); !p.isEmpty()) {
      emit openRequested(p);
      accept();
    }
  });
  connect(table_, &QTableWidget::cellDoubleClicked, this, [this] { open_->click(); });
  connect(reveal, &QPushButton::clicked, this, [this] {
    QDir().mkpath(dir_);
    QDesktopServices::openUrl(QUrl::fromLocalFile(dir_));
  });
  connect(delete_, &QPushButton::clicked, this, &ModelsDialog::deleteSelected);
  connect(download_, &QPushButton::clicked, this, &ModelsDialog::startDownload);
  connect(spec_, &QLineEdit::returnPressed, this, &ModelsDialog::startDownload);
  connect(cancel_, &QPushButton::clicked, library_, &ModelLibrary::cancel);
  connect(library_, &ModelLibrary::progress, this, &ModelsDialog::onProgress);
  connect(library_, &ModelLibrary::finished, this, &ModelsDialog::onFinished);
  refresh();
}

void ModelsDialog::refresh() {
  models_ = ModelLibrary::scan(dir_);
  table_->setRowCount(static_cast<int>(models_.size()));
  for (int i = 0; i < models_.size(); ++i) {
    const UiLocalModel& m = models_[i];
    const QStringList cells = {m.fileName,
                               m.architecture,
                               m.readable ? m.weights : tr("cannot read: %1").arg(m.weights),
                               m.contextLength > 0 ? QString::number(m.contextLength) : QString(),
                               mib(m.fileBytes),
                               !m.readable ? QString() : m.fits ? tr("yes") : tr("no (%1 needed)").arg(mib(m.neededBytes))};
    for (int c = 0; c < cells.size(); ++c) table_->setItem(i, c, new QTableWidgetItem(cells[c]));
  }
  table_->resizeColumnsToContents();
  if (models_.isEmpty())
    status_->setText(tr("No models here yet: download one (e.g. a GGUF repository's OWNER/NAME:FILE.gguf)."));
  open_->setEnabled(!models_.isEmpty());
  delete_->setEnabled(!models_.isEmpty());
}

QString ModelsDialog::selectedPath() const {
  const int row = table_->currentRow();
  return row >= 0 && row < models_.size() ? models_[row].path : QString();
}

QString ModelsDialog::status() const { return status_->text(); }

void ModelsDialog::startDownload() {
  QString error;
  if (!library_->pull(spec_->text(), dir_, error)) {
    status_->setText(error);
    return;
  }
  download_->setEnabled(false);
  cancel_->setEnabled(true);
  progress_->setRange(0, 0);
  progress_->setVisible(true);
  status_->setText(tr("Downloading %1...").arg(spec_->text().trimmed()));
}

void ModelsDialog::onProgress(qint64 done, qint64 total, double bytesPerSecond) {
  if (total > 0) {
    progress_->setRange(0, 1000);
    progress_->setValue(static_cast<int>(1000.0 * static_cast<double>(done) / static_cast<double>(total)));
  }
  const QString rate = tr("%1/s").arg(mib(static_cast<qint64>(bytesPerSecond)));
  const QString left = total > 0 && bytesPerSecond > 0
                           ? tr(", %1 s left").arg(static_cast<double>(total - done) / bytesPerSecond, 0, 'f', 0)
                           : QString();
  status_->setText(total > 0 ? tr("%1 of %2, %3%4").arg(mib(done), mib(total), rate, left) : tr("%1, %2").arg(mib(done), rate));
}

void ModelsDialog::onFinished(const QString& path, const QString& error) {
  download_->setEnabled(true);
  cancel_->setEnabled(false);
  progress_->setVisible(false);
  status_->setText(error.isEmpty() ? tr("Downloaded %1").arg(path) : error);
  refresh();
  for (int i = 0; i < models_.size(); ++i)
    if (models_[i].path == path) table_->selectRow(i);
}

void ModelsDialog::deleteSelected() {
  const QString path = selectedPath();
  if (path.isEmpty()) return;
  auto* box = new QMessageBox(QMessageBox::Question, tr("Delete model"), tr("Delete %1?").arg(path),
                              QMessageBox::NoButton, this);
  box->setObjectName(QStringLiteral("modelsDeleteConfirm"));
  QPushButton* yes = box->addButton(tr("Delete"), QMessageBox::DestructiveRole);
  yes->setObjectName(QStringLiteral("modelsDeleteYes"));
  box->addButton(QMessageBox::Cancel);
  box->setAttribute(Qt::WA_DeleteOnClose);
  connect(box, &QMessageBox::buttonClicked, this, [this, yes, path](QAbstractButton* b) {
    if (b != yes) return;
    QFile::remove(path + QStringLiteral(".part"));
    status_->setText(QFile::remove(path) ? tr("Deleted %1").arg(path) : tr("Could not delete %1").arg(path));
    refresh();
  });
  box->open();
}

}  // namespace gbui
