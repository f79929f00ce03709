#include "backend/kv_pool_sizing.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

namespace gb {

namespace {

int64_t blocks_for(int64_t tokens, int32_t block_size) { return (tokens + block_size - 1) / block_size; }

// A number from a cgroup v2 file ("max" or unreadable: nullopt).
std::optional<size_t> read_cgroup_value(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word == "max") return std::nullopt;
  try {
    return static_cast<size_t>(std::stoull(word));
  } catch (...) {
    return std::nullopt;
  }
}

}  // namespace

std::string format_bytes(size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0) std::snprintf(buf, sizeof buf, "%zu B", bytes);
  else std::snprintf(buf, sizeof buf, v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

std::string kv_types_name(KvTypes types) {
  return std::string(kernels::kv_type_name(types.k)) + "/" + std::string(kernels::kv_type_name(types.v));
}

Result<WeightType> parse_kv_type(const std::string& name, const char* option) {
  if (auto t = kernels::kv_type_from_name(name)) return *t;
  return make_error(std::string(option) + " " + name + ": not a KV type (one of " + kernels::kv_type_names() + ")");
}

std::string kv_types_unsupported(const ModelConfig& config, KvTypes types) {
  for (const WeightType t : {types.k, types.v})
    if (std::string why = kernels::kv_type_unsupported(t, config.kv_dim()); !why.empty()) return why;
  return {};
}

size_t kv_bytes_per_token(const ModelConfig& config, KvTypes types) {
  return kv_bytes_per_token(config, types, config.num_layers);
}

size_t kv_bytes_per_token(const ModelConfig& config, KvTypes types, int32_t num_layers) {
  return static_cast<size_t>(num_layers) *
         (kernels::kv_row_bytes(types.k, config.kv_dim()) + kernels::kv_row_bytes(types.v, config.kv_dim()));
}

size_t kv_bytes_per_block(const ModelConfig& config, int32_t block_size, KvTypes types) {
  return kv_bytes_per_token(config, types) * static_cast<size_t>(block_size);
}

Result<KvPoolSpec> kv_pool_spec(const ModelConfig& config, const KvPoolRequest& request) {
  if (request.num_blocks.has_value() == request.num_bytes.has_value())
    return make_error("KV pool: give exactly one of --kv-blocks and --kv-bytes");
  if (request.block_size <= 0)
    return make_error("KV pool: block size must be positive, got " + std::to_string(request.block_size));
  if (std::string why = kv_types_unsupported(config, request.types); !why.empty()) return make_error("KV type: " + why);
  const size_t block_bytes =
      kv_bytes_per_token(config, request.types, request.num_layers > 0 ? request.num_layers : config.num_layers) *
      static_cast<size_t>(request.block_size);
  if (block_bytes == 0) return make_error("KV pool: the model config has no layers or KV heads");
  int64_t num_blocks = 0;
  if (request.num_blocks) {
    num_blocks = *request.num_blocks;
    if (num_blocks <= 0) return make_error("--kv-blocks " + std::to_string(num_blocks) + ": must be at least 1");
  } else {
    const int64_t bytes = *request.num_bytes;
    if (bytes <= 0 || static_cast<uint64_t>(bytes) < block_bytes)
      return make_error("--kv-bytes " + std::to_string(bytes) + ": smaller than one KV block (" +
                        std::to_string(block_bytes) + " bytes for " + std::to_string(request.block_size) +
                        " tokens at " + kv_types_name(request.types) + ")");
    num_blocks = static_cast<int64_t>(static_cast<uint64_t>(bytes) / block_bytes);
  }
  if (num_blocks > std::numeric_limits<int32_t>::max())
    return make_error("KV pool: " + std::to_string(num_blocks) + " blocks is more than the pool can index");
  return KvPoolSpec{static_cast<int32_t>(num_blocks), request.block_size, request.types.k, request.types.v};
}

size_t available_host_memory() {
  size_t available = 0;
  {
    std::ifstream in("/proc/meminfo");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("MemAvailable:", 0) != 0) continue;
      std::istringstream fields(line.substr(13));
      size_t kib = 0;
      if (fields >> kib) available = kib * 1024;
      break;
    }
  }
  // A container's limit (cgroup v2) may be below what the host has free.
  if (auto limit = read_cgroup_value("/sys/fs/cgroup/memory.max")) {
    const size_t current = read_cgroup_value("/sys/fs/cgroup/memory.current").value_or(0);
    const size_t room = *limit > current ? *limit - current : 0;
    available = available == 0 ? room : std::min(available, room);
  }
  return available;
}

size_t work_bytes(const ModelConfig& c, int32_t max_batch_tokens, int32_t max_seqs, int32_t context, int32_t threads) {
  const auto t = static_cast<size_t>(std::max(1, max_batch_tokens));
  const size_t q_dim = static_cast<size_t>(c.num_heads) * static_cast<size_t>(c.head_dim);
  const size_t per_token = 4 * static_cast<size_t>(c.dim) + 3 * static_cast<size_t>(c.hidden_dim) + 2 * q_dim +
                           4 * static_cast<size_t>(c.kv_dim());
  const size_t logits = static_cast<size_t>(std::max(1, max_seqs)) * static_cast<size_t>(c.vocab_size);
  const size_t scores = static_cast<size_t>(std::max(1, threads)) * 32 * static_cast<size_t>(std::max(1, context));
  return (t * per_token + logits + scores) * sizeof(float);
}

MemoryBudget host_budget(size_t weights, size_t work, size_t available) {
  MemoryBudget b;
  b.available = available > 0 ? available : available_host_memory();
  b.weights = weights;
  b.work = work;
  b.margin = std::max<size_t>(size_t{512} << 20, b.available / 20);
  return b;
}

MemoryBudget device_budget(size_t free, size_t total, size_t work) {
  MemoryBudget b;
  b.available = free;
  b.weights = 0;  // already resident: free is what is left after them
  b.work = work;
  b.margin = std::max<size_t>(size_t{256} << 20, total / 20);
  return b;
}

Result<KvPlan> plan_kv(const ModelConfig& config, const KvPlanRequest& request, const MemoryBudget& budget) {
  const int32_t bs = request.block_size;
  if (bs <= 0) return make_error("KV pool: block size must be positive, got " + std::to_string(bs));
  if (std::string why = kv_types_unsupported(config, request.types); !why.empty()) return make_error("KV type: " + why);
  // The loaded context (a library caller may have asked for more than the file's).
  const int32_t model_max = std::max(config.file_context_length, config.context_length);
  if (request.context < 0) return make_error("--ctx " + std::to_string(request.context) + ": must be at least 1");
  if (request.context > model_max)
    return make_error("--ctx " + std::to_string(request.context) + " is above the model's maximum context of " +
                      std::to_string(model_max) + " tokens");
  if (request.num_blocks < 0 || request.num_bytes < 0)
    return make_error("KV pool: --kv-blocks and --kv-bytes must be positive");
  if (request.num_blocks > 0 && request.num_bytes > 0) return make_error("give --kv-blocks or --kv-bytes, not both");

  KvPlan plan;
  plan.types = request.types;
  plan.budget = budget;
  const bool window_group = request.window_group && config.has_window_group();
  const int32_t window_layers = window_group ? config.num_sliding_layers() : 0;
  plan.bytes_per_token = kv_bytes_per_token(config, request.types, config.num_layers - window_layers);
  const size_t block_bytes = plan.bytes_per_token * static_cast<size_t>(bs);
  if (block_bytes == 0) return make_error("KV pool: the model config has no layers or KV heads");
  const bool known = budget.available > 0;
  size_t room = known ? budget.for_kv() : std::numeric_limits<size_t>::max();
  // The window group first: its windows (a block of slack each, for the
  // window's ragged start and a draft), one prefill chunk, fewer windows when
  // they do not fit (down to one).
  int64_t window_min = 0;
  size_t window_block_bytes = 0;
  if (window_group) {
    plan.window = config.sliding_window;
    plan.num_window_layers = window_layers;
    plan.window_bytes_per_token = kv_bytes_per_token(config, request.types, window_layers);
    window_block_bytes = plan.window_bytes_per_token * static_cast<size_t>(bs);
    const int64_t per_seq = blocks_for(plan.window, bs) + 2;
    const int64_t chunk = blocks_for(std::max(1, request.max_chunk), bs) + 1;
    window_min = per_seq + chunk;
    int64_t blocks = per_seq * std::max(1, request.window_seqs) + chunk;
    if (request.num_window_blocks > 0) {
      // Asked for exactly: at least a window and a block (kv/scheduler.h).
      const int64_t least = blocks_for(plan.window, bs) + 1;
      if (request.num_window_blocks < least)
        return make_error("window-group pool of " + std::to_string(request.num_window_blocks) + " blocks: the " +
                          std::to_string(plan.window) + "-token window needs at least " + std::to_string(least) +
                          " blocks of " + std::to_string(bs));
      blocks = window_min = request.num_window_blocks;
    }
    // At most half of what there is when short, so the global layers keep a context.
    if (known && static_cast<size_t>(blocks) * window_block_bytes > room / 2)
      blocks = std::max<int64_t>(window_min, static_cast<int64_t>(room / 2 / window_block_bytes));
    if (known && static_cast<size_t>(blocks) * window_block_bytes > room)
      return make_error("not enough memory for the sliding layers' window (" + std::to_string(window_layers) +
                        " layers, " + std::to_string(plan.window) + " tokens: " +
                        format_bytes(static_cast<size_t>(blocks) * window_block_bytes) + ")");
    plan.num_window_blocks = static_cast<int32_t>(std::min<int64_t>(blocks, std::numeric_limits<int32_t>::max()));
    plan.window_pool_bytes = static_cast<size_t>(plan.num_window_blocks) * window_block_bytes;
    if (known) room -= plan.window_pool_bytes;
  }
  // The global layers never hold fewer blocks than the window group needs
  // (it holds a suffix of the same tables): a larger window pool is waste.
  const auto trim_window = [&] {
    if (!window_group) return;
    const int64_t cap = std::max<int64_t>(window_min, int64_t{plan.num_blocks} + window_min);
    if (plan.num_window_blocks <= cap) return;
    plan.num_window_blocks = static_cast<int32_t>(cap);
    plan.window_pool_bytes = static_cast<size_t>(plan.num_window_blocks) * window_block_bytes;
  };
  const auto there_is = [&] {
    return format_bytes(room) + " is there for KV (" + format_bytes(budget.available) + " available, less " +
           format_bytes(budget.weights) + " of weights, " + format_bytes(budget.work) + " of work buffers and a " +
           format_bytes(budget.margin) + " margin)";
  };
  const std::string types = kv_types_name(request.types);
  const size_t max_blocks = room / block_bytes;

  if (request.num_blocks > 0 || request.num_bytes > 0) {
    KvPoolRequest pool;
    if (request.num_blocks > 0) {
      pool.num_blocks = request.num_blocks;
    } else {
      // --kv-bytes is the whole KV: the window group's share comes out of it.
      if (request.num_bytes <= static_cast<int64_t>(plan.window_pool_bytes))
        return make_error("--kv-bytes " + std::to_string(request.num_bytes) + ": the sliding layers' window alone needs " +
                          format_bytes(plan.window_pool_bytes));
      pool.num_bytes = request.num_bytes - static_cast<int64_t>(plan.window_pool_bytes);
    }
    pool.block_size = bs;
    pool.types = request.types;
    pool.num_layers = config.num_layers - window_layers;
    auto spec = kv_pool_spec(config, pool);
    if (!spec) return spec.error();
    const size_t bytes = static_cast<size_t>(spec->num_blocks) * block_bytes;
    if (known && bytes > room)
      return make_error(std::string(request.num_blocks > 0 ? "--kv-blocks " + std::to_string(request.num_blocks)
                                                           : "--kv-bytes " + std::to_string(request.num_bytes)) +
                        ": the pool needs " + format_bytes(bytes) + " at " + types + "; " + there_is());
    plan.num_blocks = spec->num_blocks;
    plan.context = request.context > 0 ? request.context : config.context_length;
    plan.pool_bytes = bytes;
    trim_window();
    return plan;
  }

  if (request.context > 0) {
    const int64_t need = blocks_for(request.context, bs);
    if (known && static_cast<size_t>(need) > max_blocks)
      return make_error("--ctx " + std::to_string(request.context) + " needs " +
                        format_bytes(static_cast<size_t>(need) * block_bytes) + " of KV at " + types + " (" +
                        format_bytes(plan.bytes_per_token) + " per token); " + there_is() +
                        ". A smaller --ctx or KV type (--kv-type-k/--kv-type-v q8_0) needs less");
    plan.context = request.context;
  } else {
    plan.context = config.context_length;
    if (static_cast<size_t>(blocks_for(plan.context, bs)) > max_blocks) {
      const int64_t fit = static_cast<int64_t>(max_blocks) * bs / 256 * 256;
      if (fit < 256)
        return make_error("not enough memory for a KV cache of 256 tokens at " + types + " (" +
                          format_bytes(plan.bytes_per_token * 256) + "); " + there_is());
      plan.context = static_cast<int32_t>(fit);
      plan.context_lowered = true;
      plan.note = "context " + std::to_string(config.context_length) + " does not fit: using " +
                  std::to_string(plan.context) + " tokens (KV " + types + ", " + format_bytes(plan.bytes_per_token) +
                  " per token; " + format_bytes(room) + " free for KV). --ctx N or a smaller KV type "
                  "(--kv-type-k/--kv-type-v q8_0) changes it";
    }
  }
  const int64_t per_context = blocks_for(plan.context, bs);
  const int32_t wanted = std::max(1, request.contexts);
  int64_t blocks = per_context * wanted;
  if (static_cast<size_t>(blocks) > max_blocks) {
    blocks = std::max<int64_t>(per_context, static_cast<int64_t>(max_blocks));
    if (plan.note.empty())
      plan.note = "KV pool holds " + std::to_string(blocks * bs) + " tokens (" + format_bytes(blocks * block_bytes) +
                  " at " + types + "), not " + std::to_string(wanted) + " whole contexts: that is what fits";
  }
  blocks = std::min<int64_t>(blocks, std::numeric_limits<int32_t>::max());
  plan.num_blocks = static_cast<int32_t>(blocks);
  plan.pool_bytes = static_cast<size_t>(blocks) * block_bytes;
  trim_window();
  return plan;
}

}  // namespace gb
