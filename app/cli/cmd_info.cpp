// `glassbox-cli info PATH [--json]`: describe a model file without running it:
// format, architecture, shapes, parameter count, tensor types, weight bytes and
// KV-cache bytes per token (F32, which our cache uses, and F16 for comparison).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "cli/command_registry.h"
#include "model/model.h"

namespace gb::cli {
namespace {

struct InfoArgs {
  std::string path;
  bool json = false;
  bool all_metadata = false;
};

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) { bytes /= 1024.0; ++u; }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", bytes, units[u]);
  return buf;
}

int run_info(const InfoArgs& a) {
  auto loaded = load_model(a.path);
  if (!loaded) return fail(loaded.error().message);
  const Model& m = *loaded.value();
  const ModelConfig& c = m.config;
  std::map<std::string, int> type_counts;  // dtype name -> number of tensors
  for (const TensorView* t : m.all_tensors()) ++type_counts[std::string(dtype_info(t->dtype).name)];
  const size_t kv_f32 = c.kv_bytes_per_token(4), kv_f16 = c.kv_bytes_per_token(2);

  if (a.json) {
    nlohmann::json j = {
        {"path", m.path}, {"format", std::string(model_format_name(m.format))},
        {"architecture", c.architecture}, {"name", m.name},
        {"dim", c.dim}, {"hidden_dim", c.hidden_dim}, {"num_layers", c.num_layers},
        {"num_heads", c.num_heads}, {"num_kv_heads", c.num_kv_heads}, {"head_dim", c.head_dim},
        {"rope_dim", c.rope_dim}, {"vocab_size", c.vocab_size}, {"context_length", c.context_length},
        {"rope_freq_base", c.rope_freq_base}, {"rms_eps", c.rms_eps}, {"tied_classifier", c.tied_classifier},
        {"num_parameters", m.num_parameters()}, {"tensor_types", type_counts},
        {"weight_bytes", m.weight_bytes()}, {"weight_bytes_per_token", m.weight_bytes_per_token()},
        {"kv_bytes_per_token_f32", kv_f32}, {"kv_bytes_per_token_f16", kv_f16},
        {"has_vocabulary", m.vocabulary.has_value()}};
    nlohmann::json md = nlohmann::json::array();
    for (const auto& [k, v] : m.metadata) md.push_back({k, v});
    j["metadata"] = md;
    std::puts(j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return 0;
  }
  std::printf("file           %s\n", m.path.c_str());
  std::printf("format         %s\n", std::string(model_format_name(m.format)).c_str());
  std::printf("architecture   %s\n", c.architecture.c_str());
  std::printf("name           %s\n", m.name.c_str());
  std::printf("dim            %d\n", c.dim);
  std::printf("hidden dim     %d\n", c.hidden_dim);
  std::printf("layers         %d\n", c.num_layers);
  std::printf("heads          %d (kv heads %d, head dim %d, rope dims %d)\n", c.num_heads, c.num_kv_heads,
              c.head_dim, c.rope_dim);
  std::printf("vocab          %d%s\n", c.vocab_size, c.tied_classifier ? " (classifier tied to embedding)" : "");
  std::printf("context        %d\n", c.context_length);
  std::printf("rope base      %g\n", static_cast<double>(c.rope_freq_base));
  std::printf("rms eps        %g\n", static_cast<double>(c.rms_eps));
  std::printf("parameters     %llu (%.2f M)\n", static_cast<unsigned long long>(m.num_parameters()),
              static_cast<double>(m.num_parameters()) / 1e6);
  std::printf("tensor types  ");
  for (const auto& [name, n] : type_counts) std::printf(" %s x %d", name.c_str(), n);
  std::printf("\n");
  std::printf("weight bytes   %zu (%s); read per decoded token %s\n", m.weight_bytes(),
              human_bytes(static_cast<double>(m.weight_bytes())).c_str(),
              human_bytes(static_cast<double>(m.weight_bytes_per_token())).c_str());
  std::printf("KV per token   %zu bytes F32 (our cache), %zu bytes F16; %s F32 at full context\n", kv_f32, kv_f16,
              human_bytes(static_cast<double>(kv_f32) * c.context_length).c_str());
  std::printf("vocabulary     %s\n", m.vocabulary ? (std::to_string(m.vocabulary->tokens.size()) + " tokens (" +
                                                     m.vocabulary->model + ")").c_str()
                                                  : "none embedded");
  if (a.all_metadata) {
    std::printf("metadata:\n");
    for (const auto& [k, v] : m.metadata) std::printf("  %-40s %s\n", k.c_str(), v.c_str());
  }
  return 0;
}

const CommandRegistrar kRegistrar("info", "Describe a model file (GGUF or llama2.c)",
                                  [](CLI::App& sub) -> CommandRunner {
                                    auto args = std::make_shared<InfoArgs>();
                                    sub.add_option("path", args->path, "Model file")->required();
                                    sub.add_flag("--json", args->json, "Print one JSON object");
                                    sub.add_flag("--metadata", args->all_metadata, "Also list every metadata key");
                                    return [args] { return run_info(*args); };
                                  });

}  // namespace
}  // namespace gb::cli
