// glassbox_cuda_bench: batched decode throughput and time-to-first-token of the
// CUDA backend, for the device check (tools/device-check.sh). glassbox-cli bench
// measures one sequence; this adds the batch sizes the serving engine uses.
// Prints one JSON object:
//   decode[]: {batch, context, steps, tok_s, ms_per_step}
//   ttft[]:   {prompt_tokens, seconds}
//   roofline: batch-1 weight bytes per token * tok/s / peak bandwidth
// Not a test: it asserts nothing and is never registered with CTest.
//
// usage: glassbox_cuda_bench MODEL [--batches 1,8,32,64] [--prompts 512,2048]
//                            [--steps 32] [--peak-gb-s 4300]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "model/model.h"

namespace {

using Clock = std::chrono::steady_clock;

std::vector<int32_t> parse_list(const char* s) {
  std::vector<int32_t> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::stoi(item));
  return out;
}

int fail(const std::string& message) {
  std::fprintf(stderr, "glassbox_cuda_bench: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return fail("usage: glassbox_cuda_bench MODEL [--batches 1,8,32,64] [--prompts 512,2048] [--steps N]");
  const std::string model_path = argv[1];
  std::vector<int32_t> batches = {1, 8, 32, 64}, prompts = {512, 2048};
  int32_t steps = 32, context = 128;
  double peak_gb_s = 4300.0;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--batches")) batches = parse_list(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--prompts")) prompts = parse_list(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--steps")) steps = std::stoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--peak-gb-s")) peak_gb_s = std::stod(argv[i + 1]);
    else return fail(std::string("unknown option ") + argv[i]);
  }
  const int32_t max_prompt = *std::max_element(prompts.begin(), prompts.end());
  gb::LoadOptions load;
  load.context_length = std::max(max_prompt, context + steps) + 1;
  auto model = gb::load_model(model_path, load);
  if (!model) return fail(model.error().message);
  auto made = gb::make_cuda_backend(*model);
  if (!made) return fail(made.error().message);
  gb::CudaBackend& gpu = **made;
  const gb::ModelConfig& c = (*model)->config;
  constexpr int32_t kBlock = 16;
  const int32_t max_batch = *std::max_element(batches.begin(), batches.end());
  const int32_t blocks_per_seq = (std::max(max_prompt, context + steps) + kBlock) / kBlock;
  if (auto st = gpu.init_kv_pool({blocks_per_seq * max_batch, kBlock}); !st) return fail(st.error().message);
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> pick(3, c.vocab_size - 1);
  std::vector<float> logits;
  nlohmann::json out = {{"model", model_path}, {"device", gpu.device_info().name}};

  auto table_of = [&](int32_t seq) {
    std::vector<int32_t> t(static_cast<size_t>(blocks_per_seq));
    for (int32_t i = 0; i < blocks_per_seq; ++i) t[static_cast<size_t>(i)] = seq * blocks_per_seq + i;
    return t;
  };

  // Time to first token: one prompt, logits for its last token (median of 3 after a warm-up).
  for (int32_t p : prompts) {
    std::vector<int32_t> tokens(static_cast<size_t>(p));
    for (auto& t : tokens) t = pick(rng);
    const auto table = table_of(0);
    std::vector<double> runs;
    for (int r = 0; r < 4; ++r) {
      gb::BatchLayout batch;
      batch.add_sequence(tokens.data(), p, 0, table.data(), blocks_per_seq, false);
      logits.resize(static_cast<size_t>(c.vocab_size));
      const auto t0 = Clock::now();
      if (auto st = gpu.forward(batch, logits); !st) return fail(st.error().message);
      if (r > 0) runs.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    std::sort(runs.begin(), runs.end());
    out["ttft"].push_back({{"prompt_tokens", p}, {"seconds", runs[1]}});
  }

  // Decode: `batch` sequences with `context` cached tokens each, `steps` batched steps.
  for (int32_t b : batches) {
    std::vector<std::vector<int32_t>> tables;
    gb::BatchLayout batch;
    std::vector<int32_t> prompt(static_cast<size_t>(context));
    for (int32_t s = 0; s < b; ++s) {
      tables.push_back(table_of(s));
      for (auto& t : prompt) t = pick(rng);
      batch.add_sequence(prompt.data(), context, 0, tables.back().data(), blocks_per_seq, false);
    }
    logits.resize(static_cast<size_t>(b) * static_cast<size_t>(c.vocab_size));
    if (auto st = gpu.forward(batch, logits); !st) return fail(st.error().message);
    std::vector<int32_t> next(static_cast<size_t>(b), 5);
    Clock::time_point t0;
    for (int32_t i = 0; i <= steps; ++i) {
      if (i == 1) t0 = Clock::now();  // step 0 warms up this batch size
      batch.clear();
      for (int32_t s = 0; s < b; ++s)
        batch.add_sequence(&next[static_cast<size_t>(s)], 1, context + i, tables[static_cast<size_t>(s)].data(),
                           blocks_per_seq, false);
      if (auto st = gpu.forward(batch, logits); !st) return fail(st.error().message);
      for (int32_t s = 0; s < b; ++s) {
        const float* row = logits.data() + static_cast<size_t>(s) * static_cast<size_t>(c.vocab_size);
        next[static_cast<size_t>(s)] = static_cast<int32_t>(std::max_element(row, row + c.vocab_size) - row);
      }
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    const double tok_s = static_cast<double>(b) * steps / seconds;
    out["decode"].push_back({{"batch", b}, {"context", context}, {"steps", steps}, {"tok_s", tok_s},
                             {"ms_per_step", 1000.0 * seconds / steps}});
    if (b == 1) {
      const double bytes = static_cast<double>((*model)->weight_bytes_per_token());
      out["roofline"] = {{"weight_bytes_per_token", bytes},
                         {"achieved_gb_s", bytes * tok_s / 1e9},
                         {"peak_gb_s", peak_gb_s},
                         {"ratio", bytes * tok_s / 1e9 / peak_gb_s}};
    }
  }
  const gb::DeviceInfo info = gpu.device_info();
  out["memory_used_bytes"] = info.memory_used_bytes;
  out["memory_total_bytes"] = info.memory_total_bytes;
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
