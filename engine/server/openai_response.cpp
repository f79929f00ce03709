#include "server/openai_response.h"

#include <nlohmann/json.hpp>

namespace gb::server {

namespace {

using nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string sse(const json& j) { return "data: " + dump(j) + "\n\n"; }

json bytes_of(const std::string& s) {
  json out = json::array();
  for (unsigned char c : s) out.push_back(static_cast<int>(c));
  return out;
}

bool only_space(const std::string& s) { return s.find_first_not_of(" \t\r\n") == std::string::npos; }

// OpenAI's tool_calls entries; `indexed` adds each call's index (stream deltas).
json tool_calls_json(const std::vector<ToolCall>& calls, bool indexed) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json c = json::object();
    if (indexed) c["index"] = i;
    c["id"] = calls[i].id;
    c["type"] = "function";
    c["function"] = {{"name", calls[i].name}, {"arguments", calls[i].arguments}};
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

std::string openai_finish_reason(const std::string& engine_reason) {
  if (engine_reason == "max_tokens" || engine_reason == "length") return "length";
  return "stop";  // stop token, stop string, grammar dead end; cancelled requests are never answered
}

std::string hidden_finish_reason(const std::string& engine_reason) {
  return engine_reason == "grammar_dead_end" ? engine_reason : std::string();
}

ResponseBuilder::ResponseBuilder(ResponseMeta meta) : meta_(std::move(meta)), choices_(meta_.num_choices) {
  if (meta_.endpoint == ApiEndpoint::ChatCompletions && meta_.tools.parse_calls())
    for (Choice& c : choices_) c.tool_streamer.emplace(meta_.tools.names, meta_.tools.forced());
}

std::string ResponseBuilder::logprobs_json(const std::vector<TokenLogprob>& lps, int64_t first_offset) const {
  if (meta_.endpoint == ApiEndpoint::ChatCompletions) {
    json content = json::array();
    for (const TokenLogprob& lp : lps) {
      json top = json::array();
      for (const auto& [token, logprob] : lp.top)
        top.push_back({{"token", token}, {"logprob", logprob}, {"bytes", bytes_of(token)}});
      content.push_back({{"token", lp.token}, {"logprob", lp.logprob}, {"bytes", bytes_of(lp.token)}, {"top_logprobs", top}});
    }
    return dump(json{{"content", content}, {"refusal", nullptr}});
  }
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(), offsets = json::array();
  int64_t offset = first_offset;
  for (const TokenLogprob& lp : lps) {
    tokens.push_back(lp.token);
    token_logprobs.push_back(lp.logprob);
    json top = json::object();
    for (const auto& [token, logprob] : lp.top) top[token] = logprob;
    top_logprobs.push_back(top);
    offsets.push_back(offset);
    offset += static_cast<int64_t>(lp.token.size());
  }
  return dump(json{{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top_logprobs},
                   {"text_offset", offsets}});
}

std::string ResponseBuilder::chunk_json(int choice, const std::string& text, const std::vector<TokenLogprob>& lps,
                                        const std::string& finish_reason, bool role) const {
  const bool chat = meta_.endpoint == ApiEndpoint::ChatCompletions;
  json c = {{"index", choice}};
  if (chat) {
    json delta = json::object();
    if (role) delta["role"] = "assistant";
    if (role || !text.empty() || !lps.empty()) delta["content"] = text;
    c["delta"] = delta;
  } else {
    c["text"] = text;
  }
  const int64_t offset = choices_[choice].num_token_bytes - [&] {
    int64_t n = 0;
    for (const TokenLogprob& lp : lps) n += static_cast<int64_t>(lp.token.size());
    return n;
  }();
  c["logprobs"] = meta_.logprobs && !lps.empty() ? json::parse(logprobs_json(lps, offset)) : json(nullptr);
  c["finish_reason"] = finish_reason.empty() ? json(nullptr) : json(finish_reason);
  if (!finish_reason.empty() && !choices_[choice].engine_reason.empty())
    c["glassbox_finish_reason"] = choices_[choice].engine_reason;
  json j = {{"id", meta_.id}, {"object", chat ? "chat.completion.chunk" : "text_completion"},
            {"created", meta_.created}, {"model", meta_.model}, {"system_fingerprint", "glassbox-" GLASSBOX_VERSION},
            {"choices", json::array({c})}};
  if (meta_.include_usage) j["usage"] = nullptr;
  return sse(j);
}

void ResponseBuilder::record(const ChoiceEvent& e, std::vector<TokenLogprob>* new_logprobs) {
  if (e.kind == ChoiceEvent::Kind::Error) {
    if (error_.empty()) error_ = e.error;
    return;
  }
  Choice& c = choices_.at(e.choice);
  c.text += e.text;
  if (e.logprob) {
    c.num_token_bytes += static_cast<int64_t>(e.logprob->token.size());
    c.logprobs.push_back(*e.logprob);
    if (new_logprobs) new_logprobs->push_back(*e.logprob);
  }
  if (e.kind == ChoiceEvent::Kind::Finished && !c.finished) {
    c.finished = true;
    c.finish_reason = openai_finish_reason(e.finish_reason);
    c.engine_reason = hidden_finish_reason(e.finish_reason);
    c.num_prompt_tokens = e.num_prompt_tokens;
    c.num_generated = e.num_generated;
    c.num_cached_tokens = e.num_cached_tokens;
    ++num_finished_;
  }
}

std::string ResponseBuilder::stream(const std::vector<ChoiceEvent>& events) {
  std::string out;
  if (!started_ && meta_.endpoint == ApiEndpoint::ChatCompletions)
    for (int i = 0; i < meta_.num_choices; ++i) out += chunk_json(i, "", {}, "", true);
  started_ = true;
  for (const ChoiceEvent& e : events) {
    std::vector<TokenLogprob> lps;
    record(e, &lps);
    if (e.kind == ChoiceEvent::Kind::Error) {
      out += sse(json::parse(api_error_json(ApiError{500, e.error, "server_error", "", "engine_error", 0})));
      continue;
    }
    Choice& c = choices_.at(e.choice);
    const std::string text = c.tool_streamer ? c.tool_streamer->feed(e.text) : e.text;
    if (!text.empty() || !lps.empty()) out += chunk_json(e.choice, text, lps, "", false);
    if (e.kind == ChoiceEvent::Kind::Finished) out += stream_finish(e.choice);
  }
  return out;
}

// The held-back content or the calls, then the finish chunk.
std::string ResponseBuilder::stream_finish(int choice) {
  Choice& c = choices_.at(static_cast<size_t>(choice));
  std::string out;
  if (c.tool_streamer) {
    ParsedToolCalls parsed = c.tool_streamer->finish();
    if (!parsed.content.empty() && !(only_space(parsed.content) && !parsed.calls.empty()))
      out += chunk_json(choice, parsed.content, {}, "", false);
    if (!parsed.calls.empty()) {
      out += tool_calls_chunk(choice, parsed.calls);
      c.finish_reason = "tool_calls";
    }
  }
  return out + chunk_json(choice, "", {}, c.finish_reason, false);
}

std::string ResponseBuilder::tool_calls_chunk(int choice, const std::vector<ToolCall>& calls) const {
  std::string out;
  const json all = tool_calls_json(calls, true);
  for (const json& call : all) {
    json c = {{"index", choice}, {"delta", {{"tool_calls", json::array({call})}}}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
    json j = {{"id", meta_.id}, {"object", "chat.completion.chunk"}, {"created", meta_.created}, {"model", meta_.model},
              {"system_fingerprint", "glassbox-" GLASSBOX_VERSION}, {"choices", json::array({c})}};
    if (meta_.include_usage) j["usage"] = nullptr;
    out += sse(j);
  }
  return out;
}

std::string ResponseBuilder::stream_end() const {
  std::string out;
  if (meta_.include_usage) {
    const bool chat = meta_.endpoint == ApiEndpoint::ChatCompletions;
    json j = {{"id", meta_.id}, {"object", chat ? "chat.completion.chunk" : "text_completion"},
              {"created", meta_.created}, {"model", meta_.model}, {"system_fingerprint", "glassbox-" GLASSBOX_VERSION},
              {"choices", json::array()}, {"usage", json::parse(usage_json())}};
    out += sse(j);
  }
  return out + "data: [DONE]\n\n";
}

void ResponseBuilder::add(const std::vector<ChoiceEvent>& events) {
  for (const ChoiceEvent& e : events) record(e, nullptr);
}

std::string ResponseBuilder::usage_json() const {
  int64_t prompt = 0, completion = 0, cached = 0;
  for (size_t i = 0; i < choices_.size(); ++i) {
    completion += choices_[i].num_generated;
    if (i % static_cast<size_t>(meta_.n) == 0) {  // each prompt once
      prompt += choices_[i].num_prompt_tokens;
      cached += choices_[i].num_cached_tokens;
    }
  }
  return dump(json{{"prompt_tokens", prompt}, {"completion_tokens", completion}, {"total_tokens", prompt + completion},
                   {"prompt_tokens_details", {{"cached_tokens", cached}}}});
}

std::string ResponseBuilder::body() const {
  const bool chat = meta_.endpoint == ApiEndpoint::ChatCompletions;
  json choices = json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    json j = {{"index", i}, {"finish_reason", c.finish_reason}};
    if (!c.engine_reason.empty()) j["glassbox_finish_reason"] = c.engine_reason;
    if (chat) {
      j["message"] = {{"role", "assistant"}, {"content", c.text}, {"refusal", nullptr}};
      if (c.tool_streamer) {
        ParsedToolCalls parsed = parse_tool_calls(c.text, meta_.tools.names);
        if (!parsed.calls.empty()) {
          j["message"]["content"] = only_space(parsed.content) ? json(nullptr) : json(parsed.content);
          j["message"]["tool_calls"] = tool_calls_json(parsed.calls, false);
          j["finish_reason"] = "tool_calls";
        }
      }
    } else {
      j["text"] = c.text;
    }
    j["logprobs"] = meta_.logprobs ? json::parse(logprobs_json(c.logprobs, 0)) : json(nullptr);
    choices.push_back(std::move(j));
  }
  json j = {{"id", meta_.id}, {"object", chat ? "chat.completion" : "text_completion"}, {"created", meta_.created},
            {"model", meta_.model}, {"system_fingerprint", "glassbox-" GLASSBOX_VERSION}, {"choices", choices},
            {"usage", json::parse(usage_json())}};
  return dump(j);
}

}  // namespace gb::server
