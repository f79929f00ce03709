#include "server/serve_hub.h"

#include <cmath>

#include "kv/scheduler.h"

namespace gb::server {

namespace {
float log_prob(float p) { return p > 0.0f ? std::log(p) : -9999.0f; }
}  // namespace

EngineInfo engine_info(const Engine& engine) {
  EngineInfo info;
  info.model_path = engine.model().path;
  info.vocab_size = engine.model().config.vocab_size;
  info.max_context = engine.max_context();
  info.num_blocks = engine.num_blocks();
  info.block_size = engine.block_size();
  info.kv_types = engine.kv_plan().types;
  return info;
}

ServeHub::ServeHub(EngineInfo info, HubConfig config) : info_(std::move(info)), config_(config) {}

void ServeHub::close() {
  std::lock_guard lock(mutex_);
  closed_ = true;
}

bool ServeHub::healthy() const {
  std::lock_guard lock(mutex_);
  return healthy_ && !closed_;
}

bool ServeHub::has_commands() const {
  std::lock_guard lock(mutex_);
  return !commands_.empty();
}

void ServeHub::post(Command command) {
  {
    std::lock_guard lock(mutex_);
    commands_.push_back(std::move(command));
  }
  if (wake_) wake_();
}

SubmitOutcome ServeHub::submit(std::vector<ChoiceSubmission> items, std::shared_ptr<RequestChannel> channel) {
  auto handover = std::make_shared<Handover>();
  SubmitCommand command{std::move(items), std::move(channel), handover, {}};
  std::future<SubmitOutcome> done = command.done.get_future();
  {
    std::lock_guard lock(mutex_);
    if (closed_ || !healthy_) return {SubmitStatus::Unavailable, "the server is shutting down or its engine failed", {}};
    commands_.push_back(std::move(command));
  }
  if (wake_) wake_();
  if (done.wait_for(config_.submit_timeout) != std::future_status::ready) {
    std::unique_lock lock(handover->mutex);
    if (!handover->taken) {  // dropped: the engine thread will skip it
      handover->abandoned = true;
      return {SubmitStatus::Unavailable, "the engine did not take the request in time", {}};
    }
  }
  return done.get();  // taken: the engine thread is answering now
}

void ServeHub::cancel(std::vector<RequestId> ids) {
  if (!ids.empty()) post(CancelCommand{std::move(ids)});
}

Result<std::string> ServeHub::inspect(std::vector<TokenId> tokens, int32_t position, InsideOptions options) {
  auto handover = std::make_shared<Handover>();
  InspectCommand command{std::move(tokens), position, options, handover, {}};
  std::future<Result<std::string>> done = command.done.get_future();
  {
    std::lock_guard lock(mutex_);
    if (closed_ || !healthy_) return make_error("the server is shutting down or its engine failed");
    commands_.push_back(std::move(command));
  }
  if (wake_) wake_();
  if (done.wait_for(config_.submit_timeout) != std::future_status::ready) {
    std::unique_lock lock(handover->mutex);
    if (!handover->taken) {
      handover->abandoned = true;
      return make_error("the engine did not take the inspection in time");
    }
  }
  return done.get();
}

void ServeHub::run_commands(Engine& engine) {
  std::vector<Command> commands;
  {
    std::lock_guard lock(mutex_);
    commands.swap(commands_);
  }
  for (Command& c : commands) {
    if (auto* s = std::get_if<SubmitCommand>(&c)) {
      {
        std::lock_guard lock(s->handover->mutex);
        if (s->handover->abandoned) continue;  // its handler answered 503 already
        s->handover->taken = true;
      }
      s->done.set_value(handle_submit(engine, *s));
      continue;
    }
    if (auto* in = std::get_if<InspectCommand>(&c)) {
      {
        std::lock_guard lock(in->handover->mutex);
        if (in->handover->abandoned) continue;
        in->handover->taken = true;
      }
      Result<InsideReport> report = engine.inspect(in->tokens, in->position, in->options);
      if (report) in->done.set_value(inside_to_json(*report, engine.tokenizer()));
      else in->done.set_value(report.error());
      continue;
    }
    for (RequestId id : std::get<CancelCommand>(c).ids)
      if (live_.count(id) != 0) engine.cancel(id);  // frees its blocks now; RequestFinished "cancelled" follows
  }
}

SubmitOutcome ServeHub::handle_submit(Engine& engine, SubmitCommand& command) {
  {
    std::lock_guard lock(mutex_);
    if (closed_ || !healthy_) return {SubmitStatus::Unavailable, "the server is shutting down or its engine failed", {}};
  }
  const int32_t waiting = engine.kv_usage().num_waiting;
  if (waiting + static_cast<int32_t>(command.items.size()) > config_.max_queue)
    return {SubmitStatus::QueueFull,
            "the server's queue is full (" + std::to_string(waiting) + " requests waiting); retry later", {}};
  SubmitOutcome outcome;
  for (ChoiceSubmission& item : command.items) {
    auto id = engine.submit(std::move(item.request));
    if (!id) {
      for (RequestId done : outcome.ids) {  // all or none; their events reach no channel
        live_.erase(done);
        engine.cancel(done);
      }
      return {SubmitStatus::Rejected, id.error().message, {}};
    }
    outcome.ids.push_back(*id);
    live_[*id] = Live{command.channel, item.choice, item.logprobs, item.top_logprobs, false, 0};
  }
  return outcome;
}

void ServeHub::on_event(const TraceEvent& e, const Tokenizer& tokenizer) {
  const auto live = [&](RequestId id) -> Live* {
    auto it = live_.find(id);
    return it == live_.end() ? nullptr : &it->second;
  };
  if (const auto* t = std::get_if<TokenSampledEvent>(&e.body)) {
    if (Live* l = live(t->request)) on_token(*t, *l, tokenizer);
  } else if (const auto* a = std::get_if<RequestAdmittedEvent>(&e.body)) {
    if (Live* l = live(a->request); l && !l->admitted) {
      l->admitted = true;
      metrics_.on_admitted(a->queue_ms / 1000.0);
    }
  } else if (const auto* f = std::get_if<RequestFinishedEvent>(&e.body)) {
    if (Live* l = live(f->request)) {
      on_finished(*f, *l);
      live_.erase(f->request);
    }
  } else if (const auto* s = std::get_if<StepEvent>(&e.body)) {
    if (s->num_preemptions > 0) metrics_.on_preemptions(s->num_preemptions);
  } else if (const auto* err = std::get_if<ErrorEvent>(&e.body)) {
    if (err->request)
      if (Live* l = live(*err->request)) {
        ChoiceEvent ev;
        ev.kind = ChoiceEvent::Kind::Error;
        ev.choice = l->choice;
        ev.error = err->message;
        l->channel->push(std::move(ev));
      }
  }
}

void ServeHub::on_token(const TokenSampledEvent& t, Live& live, const Tokenizer& tokenizer) {
  ChoiceEvent ev;
  ev.kind = ChoiceEvent::Kind::Token;
  ev.choice = live.choice;
  ev.text = t.text;
  live.num_text_bytes += t.text.size();
  if (live.logprobs) {
    TokenLogprob lp;
    lp.token = tokenizer.token_bytes(t.token);
    lp.logprob = log_prob(t.record.chosen_prob_before);
    for (size_t i = 0; i < t.record.top.size() && static_cast<int>(i) < live.top_logprobs; ++i)
      lp.top.emplace_back(tokenizer.token_bytes(t.record.top[i].id), log_prob(t.record.top[i].prob_before));
    ev.logprob = std::move(lp);
  }
  live.channel->push(std::move(ev));
}

void ServeHub::on_finished(const RequestFinishedEvent& f, Live& live) {
  FinishedSample sample;
  sample.reason = f.reason;
  sample.num_prompt_tokens = f.num_prompt_tokens;
  sample.num_cached_tokens = f.num_cached_tokens;
  sample.num_generated = f.num_generated;
  sample.ttft_s = f.num_generated > 0 ? f.ttft_ms / 1000.0 : -1.0;
  sample.tpot_s = f.num_generated > 1 ? f.tpot_ms / 1000.0 : -1.0;
  sample.e2e_s = f.e2e_ms / 1000.0;
  metrics_.on_finished(sample);

  ChoiceEvent ev;
  ev.kind = ChoiceEvent::Kind::Finished;
  ev.choice = live.choice;
  // Text held back while it could still become a stop string (or an unfinished
  // UTF-8 character) is released only with the finish.
  if (f.text.size() > live.num_text_bytes) ev.text = f.text.substr(live.num_text_bytes);
  ev.finish_reason = f.reason;
  ev.num_prompt_tokens = f.num_prompt_tokens;
  ev.num_generated = f.num_generated;
  ev.num_cached_tokens = f.num_cached_tokens;
  live.channel->push(std::move(ev));
}

void ServeHub::fail_all(Engine& engine, const std::string& message, bool unhealthy) {
  std::vector<Command> queued;
  {
    std::lock_guard lock(mutex_);
    if (unhealthy) healthy_ = false;
    queued.swap(commands_);
  }
  for (Command& c : queued)
    if (auto* s = std::get_if<SubmitCommand>(&c)) {
      std::lock_guard lock(s->handover->mutex);
      if (s->handover->abandoned) continue;
      s->handover->taken = true;
      s->done.set_value({SubmitStatus::Unavailable, message, {}});
    } else if (auto* in = std::get_if<InspectCommand>(&c)) {
      std::lock_guard lock(in->handover->mutex);
      if (in->handover->abandoned) continue;
      in->handover->taken = true;
      in->done.set_value(make_error(message));
    }
  std::vector<RequestId> ids;
  for (auto& [id, live] : live_) {
    ChoiceEvent ev;
    ev.kind = ChoiceEvent::Kind::Error;
    ev.choice = live.choice;
    ev.error = message;
    live.channel->push(std::move(ev));
    ids.push_back(id);
  }
  live_.clear();  // the cancellations' events reach no channel
  for (RequestId id : ids) engine.cancel(id);
  update_gauges(engine);
}

void ServeHub::update_gauges(const Engine& engine) {
  const Engine::KvUsage u = engine.kv_usage();
  KvGauges g;
  g.num_running = u.num_running;
  g.num_waiting = u.num_waiting;
  g.num_blocks_total = engine.num_pool_blocks();  // owned and cached count over the whole pool
  g.num_blocks_owned = u.num_owned;
  g.num_blocks_cached = u.num_cached;
  metrics_.set_kv(g);
}

}  // namespace gb::server
