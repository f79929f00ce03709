// `glassbox-cli info PATH [--json] [--ctx N] [--check-tensors] [--compare REF]`:
// describe a model file without running it: format, architecture, shapes,
// parameter count, a table of weight types (tensors, values, bytes, bits per
// weight), weight bytes, KV-cache bytes per token (F32, which our cache uses,
// and F16 for comparison) and a memory estimate (weights + KV pool at the
// context). --check-tensors scans every block for NaN/Inf scales; --compare
// prints the RMSE of every weight type against the same tensors of REF (e.g.
// the F16 file a quantized one was made from).
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>

#include "backend/kv_pool_sizing.h"
#include "cli/command_registry.h"
#include "model/architecture.h"
#include "model/model.h"
#include "model/weight_report.h"
#include "runtime/make_backend.h"

namespace gb::cli {
namespace {

struct InfoArgs {
  std::string path;
  bool json = false;
  bool all_metadata = false;
  bool check_tensors = false;
  int32_t context_length = 0;
  std::string compare;
  KvTypes kv_types;  // --kv-type-k / --kv-type-v
  std::string kv_type_k = "f16", kv_type_v = "f16";
  bool swa_full = false;
};

// The KV plan on this host for --ctx and the KV types (what generate would
// get): the context, and the note or the refusal it would print.
struct InfoPlan {
  std::optional<KvPlan> plan;
  std::string error;
};
InfoPlan info_plan(const Model& m, const InfoArgs& a) {
  const ModelConfig& c = m.config;
  KvPlanRequest request;
  request.context = a.context_length;
  request.types = a.kv_types;
  request.window_group = !a.swa_full && c.has_window_group();
  const MemoryBudget budget =
      host_budget(m.weight_bytes(), work_bytes(c, 512, 1, a.context_length > 0 ? a.context_length : c.context_length, 1));
  auto plan = plan_kv(c, request, budget);
  InfoPlan out;
  if (plan) out.plan = *plan;
  else out.error = plan.error().message;
  return out;
}

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) { bytes /= 1024.0; ++u; }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", bytes, units[u]);
  return buf;
}

// RMSE of each of m's weight types against the same tensors of ref.
int print_comparison(const Model& m, const std::string& ref_path) {
  auto loaded = load_model(ref_path);
  if (!loaded) return fail(loaded.error().message);
  const auto mine = m.all_tensors(), theirs = loaded.value()->all_tensors();
  if (mine.size() != theirs.size()) return fail("--compare: the two models have different tensor lists");
  struct Sum { int tensors = 0; double values = 0, sq_err = 0, sq_ref = 0; };
  std::map<std::string, Sum> by_type;
  for (size_t i = 0; i < mine.size(); ++i) {
    const TensorView &a = *mine[i], &b = *theirs[i];
    if (a.rows != b.rows || a.cols != b.cols) return fail("--compare: tensor " + a.name + " differs in shape");
    std::vector<float> x(static_cast<size_t>(a.cols)), y(static_cast<size_t>(a.cols));
    Sum& s = by_type[std::string(dtype_info(a.dtype).name)];
    ++s.tensors;
    for (int64_t r = 0; r < a.rows; ++r) {
      kernels::weight_traits(a.dtype).dequantize_row(a.row(r), x.data(), a.cols);
      kernels::weight_traits(b.dtype).dequantize_row(b.row(r), y.data(), b.cols);
      for (size_t c = 0; c < x.size(); ++c) {
        s.sq_err += (static_cast<double>(x[c]) - y[c]) * (static_cast<double>(x[c]) - y[c]);
        s.sq_ref += static_cast<double>(y[c]) * y[c];
      }
      s.values += static_cast<double>(a.cols);
    }
  }
  std::printf("rmse vs %s\n  %-8s %8s %14s %12s\n", ref_path.c_str(), "type", "tensors", "rmse", "rmse/rms");
  for (const auto& [name, s] : by_type)
    std::printf("  %-8s %8d %14.6g %12.6g\n", name.c_str(), s.tensors, std::sqrt(s.sq_err / s.values),
                s.sq_ref > 0 ? std::sqrt(s.sq_err / s.sq_ref) : 0.0);
  return 0;
}

std::map<std::string, int> tensor_type_counts(const Model& m) {
  std::map<std::string, int> type_counts;  // dtype name -> number of tensors
  for (const TensorView* t : m.all_tensors()) ++type_counts[std::string(dtype_info(t->dtype).name)];
  return type_counts;
}

// --json: the whole description as one object.
void print_info_json(const Model& m, const InfoArgs& a) {
  const ModelConfig& c = m.config;
  const auto type_counts = tensor_type_counts(m);
  const size_t kv_f32 = c.kv_bytes_per_token(4), kv_f16 = c.kv_bytes_per_token(2);
  const size_t kv_chosen = kv_bytes_per_token(c, a.kv_types);
  const uint64_t memory = m.weight_bytes() + static_cast<uint64_t>(kv_chosen) * static_cast<uint64_t>(c.context_length);
  const InfoPlan plan = info_plan(m, a);
  nlohmann::json j = {
      {"path", m.path}, {"format", std::string(model_format_name(m.format))},
      {"architecture", c.architecture}, {"name", m.name},
      {"dim", c.dim}, {"hidden_dim", c.hidden_dim}, {"num_layers", c.num_layers},
      {"num_heads", c.num_heads}, {"num_kv_heads", c.num_kv_heads}, {"head_dim", c.head_dim},
      {"rope_dim", c.rope_dim}, {"vocab_size", c.vocab_size}, {"context_length", c.context_length},
      {"rope_freq_base", c.rope_freq_base}, {"rms_eps", c.rms_eps}, {"tied_classifier", c.tied_classifier},
      {"rope_style", c.rope_style == RopeStyle::NeoX ? "neox" : "adjacent"}, {"rope", describe_rope(c)},
      {"rope_freq_base_swa", c.rope_freq_base_swa}, {"rope_freq_scale", c.rope_freq_scale},
      {"rope_attn_factor", c.rope_attn_factor}, {"rope_long_factors", c.rope_long_factors},
      {"sliding_window", c.sliding_window}, {"sliding_window_pattern", c.swa_pattern},
      {"attn_softcap", c.attn_softcap}, {"final_softcap", c.final_softcap}, {"query_scale", c.query_scale()},
      {"embed_scale", c.embed_scale}, {"block", describe_block(c)},
      {"num_parameters", m.num_parameters()}, {"active_parameters", m.active_parameters()},
      {"num_experts", c.num_experts}, {"num_experts_used", c.num_experts_used},
      {"expert_hidden_dim", c.expert_hidden_dim}, {"tensor_types", type_counts},
      {"weight_bytes", m.weight_bytes()}, {"weight_bytes_per_token", m.weight_bytes_per_token()},
      {"kv_bytes_per_token_f32", kv_f32}, {"kv_bytes_per_token_f16", kv_f16},
      {"kv_type_k", std::string(kernels::kv_type_name(a.kv_types.k))},
      {"kv_type_v", std::string(kernels::kv_type_name(a.kv_types.v))}, {"kv_bytes_per_token", kv_chosen},
      {"has_vocabulary", m.vocabulary.has_value()}, {"bits_per_weight", bits_per_weight(m)},
      {"type_label", weight_type_label(m)}, {"memory_estimate_bytes", memory},
      {"tensors_checked", a.check_tensors}};
  nlohmann::json rows = nlohmann::json::array();
  for (const WeightTypeRow& r : weight_type_table(m))
    rows.push_back({{"type", std::string(dtype_info(r.type).name)}, {"tensors", r.num_tensors},
                    {"values", r.num_values}, {"bytes", r.num_bytes}, {"bits_per_weight", r.bits_per_weight()}});
  j["weight_types"] = rows;
  nlohmann::json p = {{"fits", plan.plan.has_value()}};
  if (plan.plan) {
    p["context"] = plan.plan->context;
    p["context_lowered"] = plan.plan->context_lowered;
    p["kv_bytes"] = static_cast<uint64_t>(plan.plan->bytes_per_token) * static_cast<uint64_t>(plan.plan->context) +
                    plan.plan->window_pool_bytes;
    // One entry per layer group: the global (or only) one, then the window group.
    nlohmann::json groups = nlohmann::json::array();
    groups.push_back({{"layers", c.num_layers - plan.plan->num_window_layers},
                      {"window", 0},
                      {"bytes_per_token", plan.plan->bytes_per_token},
                      {"tokens", plan.plan->context}});
    if (plan.plan->num_window_blocks > 0)
      groups.push_back({{"layers", plan.plan->num_window_layers},
                        {"window", plan.plan->window},
                        {"bytes_per_token", plan.plan->window_bytes_per_token},
                        {"pool_blocks", plan.plan->num_window_blocks},
                        {"pool_bytes", plan.plan->window_pool_bytes}});
    p["groups"] = groups;
    p["budget_for_kv_bytes"] = plan.plan->budget.for_kv();
    p["available_bytes"] = plan.plan->budget.available;
    p["note"] = plan.plan->note;
  } else {
    p["error"] = plan.error;
  }
  j["kv_plan"] = p;
  const CudaReadiness cuda = cuda_readiness(m);
  j["cuda"] = {{"installed", cuda.installed}, {"weights_supported", cuda.weights}, {"device", cuda.device},
               {"reason", cuda.reason}};
  nlohmann::json md = nlohmann::json::array();
  for (const auto& [k, v] : m.metadata) md.push_back({k, v});
  j["metadata"] = md;
  std::puts(j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}

// The architecture: shapes, the decoder block, RoPE, windows, soft-caps.
void print_architecture(const Model& m) {
  const ModelConfig& c = m.config;
  std::printf("file           %s\n", m.path.c_str());
  std::printf("format         %s\n", std::string(model_format_name(m.format)).c_str());
  std::printf("architecture   %s\n", c.architecture.c_str());
  std::printf("name           %s\n", m.name.c_str());
  std::printf("dim            %d\n", c.dim);
  if (c.is_moe() && c.expert_hidden_dim != c.hidden_dim)  // Qwen3-MoE: the dense width is in the file, unused
    std::printf("hidden dim     %d per expert (the file's dense FFN width %d is not used)\n", c.expert_hidden_dim,
                c.hidden_dim);
  else
    std::printf("hidden dim     %d%s\n", c.hidden_dim, c.is_moe() ? " per expert" : "");
  std::printf("layers         %d\n", c.num_layers);
  std::printf("heads          %d (kv heads %d, head dim %d, rope dims %d)\n", c.num_heads, c.num_kv_heads,
              c.head_dim, c.rope_dim);
  std::printf("vocab          %d%s\n", c.vocab_size, c.tied_classifier ? " (classifier tied to embedding)" : "");
  std::printf("context        %d\n", c.context_length);
  if (const ArchitectureSpec* spec = find_architecture(c.architecture))
    std::printf("arch summary   %s\n", std::string(spec->summary).c_str());
  std::printf("block          %s\n", describe_block(c).c_str());
  std::printf("rope           %s\n", describe_rope(c).c_str());
  std::printf("sliding window %s\n", describe_sliding_window(c).c_str());
  std::printf("soft-caps      %s\n", describe_softcaps(c).c_str());
  std::printf("rms eps        %g\n", static_cast<double>(c.rms_eps));
}

// Parameters, weight types, bytes, the KV cache and memory estimate, the vocabulary.
void print_weights(const Model& m, const InfoArgs& a) {
  const ModelConfig& c = m.config;
  const auto type_counts = tensor_type_counts(m);
  const size_t kv = kv_bytes_per_token(c, a.kv_types), kv_f32 = c.kv_bytes_per_token(4);
  const uint64_t memory = m.weight_bytes() + static_cast<uint64_t>(kv) * static_cast<uint64_t>(c.context_length);
  const std::string types = kv_types_name(a.kv_types);
  std::printf("parameters     %llu (%.2f M)", static_cast<unsigned long long>(m.num_parameters()),
              static_cast<double>(m.num_parameters()) / 1e6);
  if (c.is_moe())
    std::printf("; %.2f M active per token (%d of %d experts)", static_cast<double>(m.active_parameters()) / 1e6,
                c.num_experts_used, c.num_experts);
  std::printf("\n");
  std::printf("tensor types  ");
  for (const auto& [name, n] : type_counts) std::printf(" %s x %d", name.c_str(), n);
  std::printf("\n");
  std::printf("weight types   %-8s %8s %14s %14s %7s\n", "type", "tensors", "values", "bytes", "bpw");
  for (const WeightTypeRow& r : weight_type_table(m))
    std::printf("               %-8s %8d %14llu %14llu %7.3f\n", std::string(dtype_info(r.type).name).c_str(),
                r.num_tensors, static_cast<unsigned long long>(r.num_values),
                static_cast<unsigned long long>(r.num_bytes), r.bits_per_weight());
  std::printf("               %-8s %8zu %14llu %14zu %7.3f  (%s)\n", "total", m.all_tensors().size(),
              static_cast<unsigned long long>(m.num_parameters()), m.weight_bytes(), bits_per_weight(m),
              weight_type_label(m).c_str());
  std::printf("weight bytes   %zu (%s); read per decoded token %s\n", m.weight_bytes(),
              human_bytes(static_cast<double>(m.weight_bytes())).c_str(),
              human_bytes(static_cast<double>(m.weight_bytes_per_token())).c_str());
  std::printf("KV per token   %zu bytes at K/V %s (%d layers x (K %zu + V %zu bytes)); F32 %zu; %s at full context\n",
              kv, types.c_str(), c.num_layers, kernels::kv_row_bytes(a.kv_types.k, c.kv_dim()),
              kernels::kv_row_bytes(a.kv_types.v, c.kv_dim()), kv_f32,
              human_bytes(static_cast<double>(kv) * c.context_length).c_str());
  std::printf("memory         %s = weights %s + KV %s (%s, %d tokens)\n",
              human_bytes(static_cast<double>(memory)).c_str(), human_bytes(static_cast<double>(m.weight_bytes())).c_str(),
              human_bytes(static_cast<double>(memory - m.weight_bytes())).c_str(), types.c_str(), c.context_length);
  const InfoPlan plan = info_plan(m, a);
  if (!plan.plan)
    std::printf("plan here      refused: %s\n", plan.error.c_str());
  else
    std::printf("plan here      context %d (KV %s of %s for KV: %s available less weights, work and margin)%s%s\n",
                plan.plan->context,
                format_bytes(plan.plan->bytes_per_token * static_cast<size_t>(plan.plan->context) +
                             plan.plan->window_pool_bytes)
                    .c_str(),
                format_bytes(plan.plan->budget.for_kv()).c_str(), format_bytes(plan.plan->budget.available).c_str(),
                plan.plan->note.empty() ? "" : "\n               ", plan.plan->note.c_str());
  if (plan.plan && plan.plan->num_window_blocks > 0)
    std::printf("KV groups      global: %d layers, %s per token, the whole context\n"
                "               sliding (window %d): %d layers, %s per token, only the window: a pool of %d blocks "
                "(%s) for all requests (--swa-full keeps every token: %s per context)\n",
                c.num_layers - plan.plan->num_window_layers, format_bytes(plan.plan->bytes_per_token).c_str(),
                plan.plan->window, plan.plan->num_window_layers,
                format_bytes(plan.plan->window_bytes_per_token).c_str(), plan.plan->num_window_blocks,
                format_bytes(plan.plan->window_pool_bytes).c_str(),
                format_bytes(plan.plan->window_bytes_per_token * static_cast<size_t>(plan.plan->context)).c_str());
  if (a.check_tensors) std::printf("tensor check   every block's scales are finite\n");
  const CudaReadiness cuda = cuda_readiness(m);
  std::printf("CUDA           %s\n", cuda.device ? "ready: --device auto runs this model on the GPU"
                                                 : ("not used: " + cuda.reason).c_str());
  std::printf("vocabulary     %s\n", m.vocabulary ? (std::to_string(m.vocabulary->tokens.size()) + " tokens (" +
                                                     m.vocabulary->model + ")").c_str()
                                                  : "none embedded");
}

int run_info(InfoArgs a) {
  auto k_type = parse_kv_type(a.kv_type_k, "--kv-type-k");
  if (!k_type) return fail(k_type.error().message);
  auto v_type = parse_kv_type(a.kv_type_v, "--kv-type-v");
  if (!v_type) return fail(v_type.error().message);
  a.kv_types = {*k_type, *v_type};
  LoadOptions load;
  load.context_length = a.context_length;
  load.check_tensors = a.check_tensors;
  auto loaded = load_model(a.path, load);
  if (!loaded) return fail(loaded.error().message);
  const Model& m = *loaded.value();
  if (std::string why = kv_types_unsupported(m.config, a.kv_types); !why.empty()) return fail("KV type: " + why);
  if (a.json) {
    print_info_json(m, a);
    return 0;
  }
  print_architecture(m);
  print_weights(m, a);
  if (a.all_metadata) {
    std::printf("metadata:\n");
    for (const auto& [k, v] : m.metadata) std::printf("  %-40s %s\n", k.c_str(), v.c_str());
  }
  if (!a.compare.empty()) return print_comparison(m, a.compare);
  return 0;
}

const CommandRegistrar info_command("info", "Describe a model file (GGUF or llama2.c)",
                                  [](CLI::App& sub) -> CommandRunner {
                                    auto args = std::make_shared<InfoArgs>();
                                    sub.add_option("path", args->path, "Model file")->required();
                                    sub.add_flag("--json", args->json, "Print one JSON object");
                                    sub.add_flag("--metadata", args->all_metadata, "Also list every metadata key");
                                    sub.add_option("--ctx", args->context_length,
                                                   "Context for the memory estimate and the plan (default: the file's)");
                                    sub.add_option("--kv-type-k", args->kv_type_k, "KV type of K for the estimate and the plan (also -ctk)")
                                        ->capture_default_str();
                                    sub.add_option("--kv-type-v", args->kv_type_v, "KV type of V (also -ctv)")
                                        ->capture_default_str();
                                    sub.add_flag("--check-tensors", args->check_tensors,
                                                 "Scan every weight block for NaN/Inf scales");
                                    sub.add_flag("--swa-full", args->swa_full,
                                                 "Plan as if sliding-window layers kept every token");
                                    sub.add_option("--compare", args->compare,
                                                   "Print each weight type's RMSE against this model's tensors");
                                    return [args] { return run_info(*args); };
                                  });

}  // namespace
}  // namespace gb::cli
