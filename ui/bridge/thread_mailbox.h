// Mailbox: closures handed from any thread to the thread a QObject lives on,
// run there in the order they were posted.
//
// Why not Qt's queued calls: they carry their arguments through Qt's own
// futex-based locks, which ThreadSanitizer cannot see (Debian's Qt is not built
// with it), so every value handed over that way reads to TSan as a race, and
// the only suppression broad enough to silence them would hide real races on
// the engine thread too. A Mailbox hands its closures over under a std::mutex
// (TSan sees the happens-before edge) and leaves Qt only a wake-up that carries
// no data of ours. EngineController sends every command in and every signal
// out through one (docs/architecture.md, "Threads").
//
// Threads: post() and close() from any thread; the closures run on the
// mailbox's thread. A post() made on that thread with nothing queued runs at
// once, as a direct call would (Delivery::Queued: never at once); otherwise
// the closure waits for the closures posted before it and runs when that
// thread's event loop next does.
#pragma once

#include <QObject>
#include <deque>
#include <functional>
#include <mutex>

namespace gbui {

class Mailbox : public QObject {
  Q_OBJECT
 public:
  explicit Mailbox(QObject* parent = nullptr);

  enum class Delivery { Auto, Queued };
  void post(std::function<void()> task, Delivery delivery = Delivery::Auto);
  // Drops what is queued and ignores later posts (the closures' owner is going away).
  void close();

 private:
  // Runs the queued closures one at a time (a closure may post more, or run a
  // nested event loop that drains the rest: the order holds either way).
  Q_INVOKABLE void drain();

  std::mutex mutex_;
  std::deque<std::function<void()>> tasks_;
  bool wakePending_ = false;  // a drain() is queued in the event loop
  bool closed_ = false;
};

}  // namespace gbui
