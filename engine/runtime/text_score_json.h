// The JSON form of a TextScore, shared by `glassbox-cli score --json` and the
// workbench's Score view. Schema: docs/compare.md ("Scoring text").
// Threads: pure function.
#pragma once

#include <string>

#include "runtime/text_scorer.h"

namespace gb {

class Tokenizer;

struct TextScoreJsonOptions {
  std::string model_path;
  std::string base_path;  // with a base model
  std::string text_file;
  int window = 0;         // > 0: scored in llama-perplexity windows of this many tokens ("window")
};

std::string text_score_to_json(const TextScore& score, const Tokenizer& tokenizer, const TextScoreJsonOptions& options);

}  // namespace gb
