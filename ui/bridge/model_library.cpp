#include "model_library.h"

#include <QMetaObject>
#include <QPointer>

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

bool ModelLibrary::pull(const QString& spec, const QString& dir, QString& error) {
  if (busy()) {
    error = tr("A download is running already.");
    return false;
  }
  join();
  auto parsed = dl::parse_model_spec(spec.trimmed().toStdString());
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
    const dl::HubOptions hub = dl::hub_options_from_env();
    dl::DownloadOptions o;
    std::string file = spec.file;
    if (!spec.is_url) {
      auto files = dl::list_repo_files(hub, spec.repo, spec.revision);
      if (!files) return report({}, QString::fromStdString(files.error().message)), void(done_ = true);
      const dl::RemoteFile* chosen = nullptr;
      int ggufs = 0;
      for (const auto& f : *files) {
        const bool gguf = f.path.size() > 5 && f.path.compare(f.path.size() - 5, 5, ".gguf") == 0;
        ggufs += gguf ? 1 : 0;
        if ((!file.empty() && f.path == file) || (file.empty() && gguf)) chosen = &f;
      }
      if (!chosen || (file.empty() && ggufs > 1)) {
        done_ = true;
        return report({}, file.empty() ? tr("%1 has %2 GGUF files: name one as %1:FILE.gguf")
                                             .arg(QString::fromStdString(spec.repo))
                                             .arg(ggufs)
                                       : tr("%1 has no file %2").arg(QString::fromStdString(spec.repo),
                                                                    QString::fromStdString(file)));
      }
      file = chosen->path;
      o.expected_size = chosen->size;
      o.expected_sha256 = chosen->sha256;
      o.bearer_token = hub.token;
    }
    o.url = dl::resolve_url(hub, spec, file);
    o.destination = std::filesystem::path(target) / std::filesystem::path(file).filename();
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
    if (std::filesystem::exists(o.destination)) {
      done_ = true;
      return report({}, tr("%1 exists already").arg(QString::fromStdString(o.destination.string())));
    }
    auto done = dl::download_file(o);
    done_ = true;
    if (!done) return report({}, QString::fromStdString(done.error().message));
    report(QString::fromStdString(done->string()), {});
  });
  return true;
}

void ModelLibrary::cancel() { cancel_ = true; }

}  // namespace gbui
