#include "atomic_write.h"

#include <QFile>
#include <string_view>

#include "core/atomic_file.h"

namespace gbui {

QString writeFileAtomically(const QString& path, const QByteArray& bytes) {
  const gb::Status st = gb::write_file_atomically(QFile::encodeName(path).toStdString(),
                                                  std::string_view(bytes.constData(), static_cast<size_t>(bytes.size())));
  return st ? QString() : QString::fromStdString(st.error().message);
}

}  // namespace gbui
