#include "server/engine_worker.h"

#include <cmath>

#include "kv/scheduler.h"

namespace gb::server {

namespace {
// Handler threads wait this long for the engine thread to take a submission
// before answering 503 (the engine is stuck in a very long step).
constexpr auto kSubmitTimeout = std::chrono::seconds(30);

float log_prob(float p) { return p > 0.0f ? std::log(p) : -9999.0f; }
}  // namespace

EngineWorker::EngineWorker(std::unique_ptr<Engine> engine, WorkerConfig config)
    : engine_(std::move(engine)), config_(config) {
  info_.model_path = engine_->model().path;
  info_.vocab_size = engine_->model().config.vocab_size;
  info_.max_context = engine_->max_context();
  info_.num_blocks = engine_->num_blocks();
  info_.block_size = engine_->block_size();
}

EngineWorker::~EngineWorker() { stop(); }

void EngineWorker::start() {
  GB_CHECK_MSG(!thread_.joinable(), "EngineWorker::start called twice");
  update_gauges();
  thread_ = std::thread([this] { run(); });
}

void EngineWorker::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool EngineWorker::healthy() const {
  std::lock_guard lock(mutex_);
  return healthy_ && !stopping_;
}

void EngineWorker::post(Command command) {
  {
    std::lock_guard lock(mutex_);
    commands_.push_back(std::move(command));
  }
  cv_.notify_all();
}

SubmitOutcome EngineWorker::submit(std::vector<ChoiceSubmission> items, std::shared_ptr<RequestChannel> channel) {
  SubmitCommand command{std::move(items), std::move(channel), {}};
  std::future<SubmitOutcome> done = command.done.get_future();
  {
    std::lock_guard lock(mutex_);
    if (stopping_ || !healthy_) return {SubmitStatus::Unavailable, "the server is shutting down or its engine failed", {}};
    commands_.push_back(std::move(command));
  }
  cv_.notify_all();
  if (done.wait_for(kSubmitTimeout) != std::future_status::ready)
    return {SubmitStatus::Unavailable, "the engine did not take the request in time", {}};
  return done.get();
}

void EngineWorker::cancel(std::vector<RequestId> ids) {
  if (!ids.empty()) post(CancelCommand{std::move(ids)});
}

void EngineWorker::run() {
  for (;;) {
    std::deque<Command> commands;
    {
      std::unique_lock lock(mutex_);
      if (!engine_->has_work()) cv_.wait(lock, [&] { return stopping_ || !commands_.empty(); });
      if (stopping_) break;
      commands.swap(commands_);
    }
    for (Command& c : commands) handle_command(c);
    if (engine_->has_work() && config_.step_interval.count() > 0) {
      // Slow motion: wait out the interval, but wake for commands and stop.
      std::unique_lock lock(mutex_);
      cv_.wait_until(lock, last_step_ + config_.step_interval, [&] { return stopping_ || !commands_.empty(); });
      if (stopping_) break;
      if (!commands_.empty() && std::chrono::steady_clock::now() < last_step_ + config_.step_interval) continue;
    }
    if (engine_->has_work()) {
      last_step_ = std::chrono::steady_clock::now();
      auto stepped = engine_->step();
      if (!stepped) {
        fail_all("engine failure: " + stepped.error().message);
        std::lock_guard lock(mutex_);
        healthy_ = false;
      }
    }
    for (const TraceEvent& e : engine_->drain_events()) dispatch(e);
    update_gauges();
  }
  // Shutting down: refuse what is queued, cancel what is live.
  std::deque<Command> rest;
  {
    std::lock_guard lock(mutex_);
    rest.swap(commands_);
  }
  for (Command& c : rest)
    if (auto* s = std::get_if<SubmitCommand>(&c)) s->done.set_value({SubmitStatus::Unavailable, "the server is shutting down", {}});
  fail_all("the server is shutting down");
}

void EngineWorker::handle_command(Command& command) {
  if (auto* s = std::get_if<SubmitCommand>(&command)) {
    s->done.set_value(handle_submit(*s));
    return;
  }
  for (RequestId id : std::get<CancelCommand>(command).ids) {
    if (live_.count(id) == 0) continue;  // finished meanwhile
    engine_->cancel(id);                 // frees its blocks now; emits RequestFinished "cancelled"
  }
  for (const TraceEvent& e : engine_->drain_events()) dispatch(e);
}

SubmitOutcome EngineWorker::handle_submit(SubmitCommand& command) {
  const int32_t waiting = engine_->scheduler().num_waiting();
  if (waiting + static_cast<int32_t>(command.items.size()) > config_.max_queue)
    return {SubmitStatus::QueueFull,
            "the server's queue is full (" + std::to_string(waiting) + " requests waiting); retry later", {}};
  SubmitOutcome outcome;
  for (ChoiceSubmission& item : command.items) {
    auto id = engine_->submit(std::move(item.request));
    if (!id) {
      for (RequestId done : outcome.ids) engine_->cancel(done);  // all or none
      for (RequestId done : outcome.ids) live_.erase(done);
      // The refusal and the cancellations reach the observer, no channel.
      for (const TraceEvent& e : engine_->drain_events()) dispatch(e);
      return {SubmitStatus::Rejected, id.error().message, {}};
    }
    outcome.ids.push_back(*id);
    live_[*id] = Live{command.channel, item.choice, item.logprobs, item.top_logprobs, false, 0};
  }
  return outcome;
}

void EngineWorker::dispatch(const TraceEvent& e) {
  if (observer_) observer_(e);
  const auto live = [&](RequestId id) -> Live* {
    auto it = live_.find(id);
    return it == live_.end() ? nullptr : &it->second;
  };
  if (const auto* t = std::get_if<TokenSampledEvent>(&e.body)) {
    if (Live* l = live(t->request)) on_token(*t, *l);
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

void EngineWorker::on_token(const TokenSampledEvent& t, Live& live) {
  ChoiceEvent ev;
  ev.kind = ChoiceEvent::Kind::Token;
  ev.choice = live.choice;
  ev.text = t.text;
  live.num_text_bytes += t.text.size();
  if (live.logprobs) {
    const Tokenizer& tok = engine_->tokenizer();
    TokenLogprob lp;
    lp.token = tok.token_bytes(t.token);
    lp.logprob = log_prob(t.record.chosen_prob_before);
    for (size_t i = 0; i < t.record.top.size() && static_cast<int>(i) < live.top_logprobs; ++i)
      lp.top.emplace_back(tok.token_bytes(t.record.top[i].id), log_prob(t.record.top[i].prob_before));
    ev.logprob = std::move(lp);
  }
  live.channel->push(std::move(ev));
}

void EngineWorker::on_finished(const RequestFinishedEvent& f, Live& live) {
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

void EngineWorker::fail_all(const std::string& message) {
  std::vector<RequestId> ids;
  for (auto& [id, live] : live_) {
    ChoiceEvent ev;
    ev.kind = ChoiceEvent::Kind::Error;
    ev.choice = live.choice;
    ev.error = message;
    live.channel->push(std::move(ev));
    ids.push_back(id);
  }
  live_.clear();  // the cancellations below reach the observer, no channel
  for (RequestId id : ids) engine_->cancel(id);
  for (const TraceEvent& e : engine_->drain_events()) dispatch(e);
  update_gauges();
}

void EngineWorker::update_gauges() {
  const Scheduler& s = engine_->scheduler();
  KvGauges g;
  g.num_running = s.num_running();
  g.num_waiting = s.num_waiting();
  g.num_blocks_total = engine_->num_blocks();
  g.num_blocks_owned = s.kv_cache().num_owned();
  g.num_blocks_cached = s.kv_cache().num_cached();
  metrics_.set_kv(g);
}

}  // namespace gb::server
