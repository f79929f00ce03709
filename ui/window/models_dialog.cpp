#include "models_dialog.h"

#include <QDesktopServices>
#include <QDir>
#include <QFile>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QTableWidget>
#include <QUrl>
#include <QVBoxLayout>

namespace gbui {
namespace {

// "278.04 MiB", "1.88 GiB": the IEC units the Model panel uses.
QString mib(qint64 bytes) { return QLocale().formattedDataSize(bytes); }

// A read-only, single-row-selection table with these headers.
QTableWidget* newModelsTable(const char* objectName, const QStringList& headers) {
  auto* t = new QTableWidget;
  t->setObjectName(QLatin1String(objectName));
  t->setColumnCount(static_cast<int>(headers.size()));
  t->setHorizontalHeaderLabels(headers);
  t->setSelectionBehavior(QAbstractItemView::SelectRows);
  t->setSelectionMode(QAbstractItemView::SingleSelection);
  t->setEditTriggers(QAbstractItemView::NoEditTriggers);
  t->verticalHeader()->setVisible(false);
  t->horizontalHeader()->setStretchLastSection(true);
  return t;
}

void fillRow(QTableWidget* table, int row, const QStringList& cells) {
  for (int c = 0; c < cells.size(); ++c) table->setItem(row, c, new QTableWidgetItem(cells[c]));
}

}  // namespace

ModelsDialog::ModelsDialog(const QString& dir, QWidget* parent, Mode mode)
    : QDialog(parent),
      dir_(dir.isEmpty() ? ModelLibrary::defaultDir() : dir),
      mode_(mode),
      library_(new ModelLibrary(this)) {
  setWindowTitle(mode_ == Mode::FirstStart ? tr("Download a model") : tr("Models"));
  setObjectName(QStringLiteral("modelsDialog"));
  resize(860, mode_ == Mode::FirstStart ? 520 : 640);
  auto* layout = new QVBoxLayout(this);
  if (mode_ == Mode::FirstStart) {
    auto* intro = new QLabel(tr("There are no models in %1 yet. Download one of these well-known models "
                                "(from Hugging Face; the size and checksum are verified), or browse for a "
                                "model file on this computer.")
                                 .arg(dir_));
    intro->setObjectName(QStringLiteral("modelsIntro"));
    intro->setWordWrap(true);
    layout->addWidget(intro);
  }
  buildFolderSection();
  layout->addWidget(folderSection_, 1);
  buildCatalogSection();
  buildDownloadRow();
  progress_ = new QProgressBar;
  progress_->setObjectName(QStringLiteral("modelsProgress"));
  progress_->setVisible(false);
  layout->addWidget(progress_);
  status_ = new QLabel;
  status_->setObjectName(QStringLiteral("modelsStatus"));
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(status_);
  connect(library_, &ModelLibrary::progress, this, &ModelsDialog::onProgress);
  connect(library_, &ModelLibrary::finished, this, &ModelsDialog::onFinished);
  refresh();
}

// The models folder: its table and Open, Show folder, Delete.
void ModelsDialog::buildFolderSection() {
  folderSection_ = new QWidget;
  folderSection_->setObjectName(QStringLiteral("modelsFolderSection"));
  auto* box = new QVBoxLayout(folderSection_);
  box->setContentsMargins(0, 0, 0, 0);
  auto* where = new QLabel(tr("Models folder: %1").arg(dir_));
  where->setTextInteractionFlags(Qt::TextSelectableByMouse);
  box->addWidget(where);
  table_ = newModelsTable("modelsTable", {tr("File"), tr("Architecture"), tr("Weights"), tr("Context"), tr("Size"),
                                          tr("Fits here")});
  box->addWidget(table_, 1);
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
  box->addLayout(row);
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
}

// "Available to download": the catalog, the selected entry's details, Download
// (and, on a first start, Browse for a file...).
void ModelsDialog::buildCatalogSection() {
  auto* layout = static_cast<QVBoxLayout*>(this->layout());
  auto* title = new QLabel(tr("<b>Available to download</b>"));
  title->setObjectName(QStringLiteral("catalogTitle"));
  layout->addWidget(title);
  catalogTable_ = newModelsTable("catalogTable", {tr("Name"), tr("Size"), tr("Type"), tr("Architecture"),
                                                  tr("Fits here"), tr("Downloaded")});
  layout->addWidget(catalogTable_, 1);
  catalogDetails_ = new QLabel;
  catalogDetails_->setObjectName(QStringLiteral("catalogDetails"));
  catalogDetails_->setWordWrap(true);
  catalogDetails_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(catalogDetails_);
  auto* row = new QHBoxLayout;
  catalogDownload_ = new QPushButton(tr("Download selected"));
  catalogDownload_->setObjectName(QStringLiteral("catalogDownload"));
  row->addWidget(catalogDownload_);
  if (mode_ == Mode::FirstStart) {
    auto* browse = new QPushButton(tr("Browse for a file..."));
    browse->setObjectName(QStringLiteral("modelsBrowse"));
    row->addWidget(browse);
    connect(browse, &QPushButton::clicked, this, [this] {
      reject();
      emit browseRequested();
    });
  }
  row->addStretch(1);
  layout->addLayout(row);
  connect(catalogTable_, &QTableWidget::itemSelectionChanged, this, &ModelsDialog::showCatalogDetails);
  connect(catalogDownload_, &QPushButton::clicked, this, [this] {
    const int r = catalogTable_->currentRow();
    if (r < 0 || r >= catalog_.entries.size()) return;
    startDownload(catalog_.entries[r].spec, catalog_.entries[r].name);
  });
}

// A download typed in: OWNER/NAME[:FILE.gguf], a URL or a catalog id.
void ModelsDialog::buildDownloadRow() {
  auto* get = new QHBoxLayout;
  spec_ = new QLineEdit;
  spec_->setObjectName(QStringLiteral("modelsSpec"));
  spec_->setPlaceholderText(tr("Or: OWNER/NAME[:FILE.gguf] on Hugging Face, an https:// URL, or a catalog id"));
  download_ = new QPushButton(tr("Download"));
  download_->setObjectName(QStringLiteral("modelsDownload"));
  cancel_ = new QPushButton(tr("Cancel"));
  cancel_->setObjectName(QStringLiteral("modelsCancel"));
  cancel_->setEnabled(false);
  get->addWidget(spec_, 1);
  get->addWidget(download_);
  get->addWidget(cancel_);
  static_cast<QVBoxLayout*>(layout())->addLayout(get);
  const auto typed = [this] { startDownload(spec_->text(), spec_->text().trimmed()); };
  connect(download_, &QPushButton::clicked, this, typed);
  connect(spec_, &QLineEdit::returnPressed, this, typed);
  connect(cancel_, &QPushButton::clicked, library_, &ModelLibrary::cancel);
}

void ModelsDialog::refresh() {
  models_ = ModelLibrary::scan(dir_);
  table_->setRowCount(static_cast<int>(models_.size()));
  for (int i = 0; i < models_.size(); ++i) {
    const UiLocalModel& m = models_[i];
    fillRow(table_, i,
            {m.fileName, m.architecture, m.readable ? m.weights : tr("cannot read: %1").arg(m.weights),
             m.contextLength > 0 ? QString::number(m.contextLength) : QString(), mib(m.fileBytes),
             !m.readable ? QString() : m.fits ? tr("yes") : tr("no (%1 needed)").arg(mib(m.neededBytes))});
  }
  table_->resizeColumnsToContents();
  // A first start shows the folder once there is something in it.
  folderSection_->setVisible(mode_ == Mode::Library || !models_.isEmpty());
  if (models_.isEmpty() && mode_ == Mode::Library)
    status_->setText(tr("No models here yet: download one of the list below, or a GGUF repository's OWNER/NAME:FILE.gguf."));
  open_->setEnabled(!models_.isEmpty());
  delete_->setEnabled(!models_.isEmpty());
  refreshCatalog();
}

void ModelsDialog::refreshCatalog() {
  const int selected = catalogTable_->currentRow();
  catalog_ = ModelLibrary::catalog(dir_);
  catalogTable_->setRowCount(static_cast<int>(catalog_.entries.size()));
  for (int i = 0; i < catalog_.entries.size(); ++i) {
    const UiCatalogEntry& e = catalog_.entries[i];
    fillRow(catalogTable_, i,
            {e.name, mib(e.sizeBytes), e.weightType, e.architecture,
             e.fits ? tr("yes") : tr("no (%1 needed)").arg(mib(e.neededBytes)), e.downloaded ? tr("yes") : tr("no")});
  }
  catalogTable_->resizeColumnsToContents();
  if (selected >= 0 && selected < catalog_.entries.size()) catalogTable_->selectRow(selected);
  else if (!catalog_.entries.isEmpty()) catalogTable_->selectRow(0);
  showCatalogDetails();
}

void ModelsDialog::showCatalogDetails() {
  const int r = catalogTable_->currentRow();
  if (catalog_.entries.isEmpty()) {
    catalogDetails_->setText(tr("No catalog of models to offer: %1").arg(catalog_.problem));
  } else if (r >= 0 && r < catalog_.entries.size()) {
    const UiCatalogEntry& e = catalog_.entries[r];
    const double params = static_cast<double>(e.parameters);
    const QString count = params >= 1e9   ? tr("%1 B").arg(params / 1e9, 0, 'f', 1)
                          : params >= 1e6 ? tr("%1 M").arg(params / 1e6, 0, 'f', 0)
                                          : tr("%1 K").arg(params / 1e3, 0, 'f', 0);
    QString text = tr("%1 %2 parameters, context %3, licence %4, %5.")
                       .arg(e.description, count, QString::number(e.contextLength), e.license, e.spec);
    if (e.downloaded) text += tr(" Downloaded: %1").arg(e.localPath);
    catalogDetails_->setText(text);
  }
  const bool canDownload = r >= 0 && r < catalog_.entries.size() && !catalog_.entries[r].downloaded && !library_->busy();
  catalogDownload_->setEnabled(canDownload);
}

QString ModelsDialog::selectedPath() const {
  const int row = table_->currentRow();
  return row >= 0 && row < models_.size() ? models_[row].path : QString();
}

QString ModelsDialog::status() const { return status_->text(); }

void ModelsDialog::startDownload(const QString& spec, const QString& what) {
  QString error;
  if (!library_->pull(spec, dir_, error)) {
    status_->setText(error);
    return;
  }
  download_->setEnabled(false);
  catalogDownload_->setEnabled(false);
  cancel_->setEnabled(true);
  progress_->setRange(0, 0);
  progress_->setVisible(true);
  status_->setText(tr("Downloading %1...").arg(what));
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
  refresh();  // the catalog's Downloaded column and its Download button too
  for (int i = 0; i < models_.size(); ++i)
    if (models_[i].path == path) table_->selectRow(i);
  status_->setText(!error.isEmpty() ? error
                   : mode_ == Mode::FirstStart ? tr("Downloaded %1: Open it (or double-click it above).").arg(path)
                                               : tr("Downloaded %1").arg(path));
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
