#include "model_library.h"

#include <QDir>
#include <QMetaObject>
#include <QPointer>
#include <filesystem>

#include "download/catalog.h"
#include "download/model_download.h"

namespace gbui {

namespace dl = gb::download;

ModelLibrary::ModelLibrary(QObject* parent) : QObject(parent) {}

ModelLibrary::~ModelLibrary() {
  cancel_ = true;
  join();
}

void ModelLibrary::join() {
  if (worker_.joinable()) worker_.join();
}

QString ModelLibrary::defaultDir() { return QString::fromStdString(dl::default_models_dir().string()); }

QVector<UiLocalModel> ModelLibrary::scan(const QString& dir) {
  QVector<UiLocalModel> out;
  for (const dl::LocalModel& m : dl::scan_models(dir.toStdString())) {
    UiLocalModel u;
    u.path = QString::fromStdString(m.path.string());
    u.fileName = QString::fromStdString(m.path.filename().string());
    u.architecture = QString::fromStdString(m.architecture);
    u.weights = QString::fromStdString(m.weights);
    u.fileBytes = static_cast<qint64>(m.file_bytes);
    u.neededBytes = static_cast<qint64>(m.needed_bytes);
    u.contextLength = m.context_length;
    u.readable = m.readable;
    u.fits = m.fits;
    out.push_back(u);
  }
  return out;
}

bool ModelLibrary::hasModels(const QString& dir) {
  return !QDir(dir).entryList({QStringLiteral("*.gguf")}, QDir::Files | QDir::Readable).isEmpty();
}

UiCatalog ModelLibrary::catalog(const QString& dir) {
  UiCatalog out;
  auto loaded = dl::load_catalog();
  if (!loaded) {
    out.problem = QString::fromStdString(loaded.error().message);
    return out;
  }
  out.path = QString::fromStdString(loaded->path.string());
  out.userCopy = loaded->user_copy;
  out.problem = QString::fromStdString(loaded->note);
  const auto states = dl::catalog_states(loaded->catalog, dir.toStdString());
  for (size_t i = 0; i < states.size(); ++i) {
    const dl::CatalogEntry& e = loaded->catalog.entries[i];
    UiCatalogEntry u;
    u.id = QString::fromStdString(e.id);
    u.name = QString::fromStdString(e.name);
    u.spec = QString::fromStdString(e.repo + ":" + e.file);
    u.fileName = QString::fromStdString(std::filesystem::path(e.file).filename().string());
    u.weightType = QString::fromStdString(e.weight_type);
    u.architecture = QString::fromStdString(e.architecture);
    u.license = QString::fromStdString(e.license);
    u.description = QString::fromStdString(e.description);
    u.localPath = QString::fromStdString(states[i].local_path.string());
    u.sizeBytes = static_cast<qint64>(e.size_bytes);
    u.neededBytes = static_cast<qint64>(states[i].fit.needed_bytes);
    u.parameters = static_cast<qint64>(e.parameters);
    u.contextLength = e.context_length;
    u.fits = states[i].fit.fits;
    u.downloaded = states[i].downloaded;
    out.entries.push_back(u);
  }
  return out;
}

bool ModelLibrary::pull(const QString& spec, const QString& dir, QString& error) {
  if (busy()) {
    error = tr("A download is running already.");
    return false;
  }
  join();
  auto parsed = dl::resolve_pull_spec(spec.trimmed().toStdString());
  if (!parsed) {
    error = QString::fromStdString(parsed.error().message);
    return false;
  }
  cancel_ = false;
  done_ = false;
  const std::string target = dir.toStdString();
  QPointer<ModelLibrary> self(this);
  worker_ = std::thread([this, self, spec = *parsed, target] {
    const auto report = [self](const QString& path, const QString& message) {
      QMetaObject::invokeMethod(
          self, [self, path, message] { if (self) emit self->finished(path, message); }, Qt::QueuedConnection);
    };
    auto planned = dl::plan_pull(spec, dl::hub_options_from_env(), target);
    if (!planned) {
      done_ = true;
      return report({}, QString::fromStdString(planned.error().message));
    }
    dl::DownloadOptions& o = *planned;
    o.cancel = &cancel_;
    o.progress = [self](const dl::Progress& p) {
      QMetaObject::invokeMethod(
          self,
          [self, p] {
            if (self) emit self->progress(static_cast<qint64>(p.done), static_cast<qint64>(p.total), p.bytes_per_s);
          },
          Qt::QueuedConnection);
      return true;
    };
    auto done = dl::download_file(o);
    done_ = true;
    if (!done) return report({}, QString::fromStdString(done.error().message));
    report(QString::fromStdString(done->string()), {});
  });
  return true;
}

void ModelLibrary::cancel() { cancel_ = true; }

}  // namespace gbui
