#include "template/model_chat_template.h"

#include <fstream>

#include "model/gguf_file.h"

namespace gb {

Result<std::string> read_model_chat_template(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(path + ": cannot open");
  char magic[4] = {};
  if (!in.read(magic, 4) || std::string_view(magic, 4) != "GGUF") return std::string();  // llama2.c: none
  GgufReadOptions options;
  options.metadata_only = true;
  auto file = GgufFile::open(path, options);
  if (!file) return file.error();
  const GgufValue* v = file->find("tokenizer.chat_template");
  if (v == nullptr) return std::string();
  auto text = v->as_string();
  if (!text) return make_error(path + ": tokenizer.chat_template is not a string");
  return std::string(*text);
}

}  // namespace gb
