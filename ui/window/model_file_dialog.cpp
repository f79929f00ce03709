#include "model_file_dialog.h"

#include <QFileInfo>
#include <QGridLayout>
#include <QLabel>
#include <QLineEdit>

#include "bridge/model_file_summary.h"

namespace gbui {

ModelFileDialog::ModelFileDialog(QWidget* parent) : QFileDialog(parent, tr("Open model")) {
  setOption(QFileDialog::DontUseNativeDialog, true);  // the preview needs Qt's own layout
  setFileMode(QFileDialog::ExistingFile);
  setNameFilters({tr("Models (*.gguf *.bin)"), tr("All files (*)")});
  preview_ = new QLabel(this);
  preview_->setObjectName(QStringLiteral("modelPreview"));
  preview_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  if (auto* grid = qobject_cast<QGridLayout*>(layout())) grid->addWidget(preview_, grid->rowCount(), 0, 1, -1);
  // Clicking a file moves the current index; typing or selectFile() only sets
  // the name field, so follow both.
  connect(this, &QFileDialog::currentChanged, this, &ModelFileDialog::updatePreview);
  if (auto* name = findChild<QLineEdit*>(QStringLiteral("fileNameEdit")))
    connect(name, &QLineEdit::textChanged, this, [this](const QString& text) {
      updatePreview(QFileInfo(text).isAbsolute() ? text : directory().absoluteFilePath(text));
    });
}

QString ModelFileDialog::previewText() const { return preview_->text(); }

void ModelFileDialog::updatePreview(const QString& path) {
  preview_->setText(QFileInfo(path).isFile() ? modelFileLine(path) : QString());
}

}  // namespace gbui
