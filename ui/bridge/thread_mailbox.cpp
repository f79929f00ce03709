#include "thread_mailbox.h"

#include <QMetaMethod>
#include <QThread>

namespace gbui {

Mailbox::Mailbox(QObject* parent) : QObject(parent) {}

void Mailbox::post(std::function<void()> task, Delivery delivery) {
  bool wake = false;
  {
    std::unique_lock lock(mutex_);
    if (closed_) return;
    if (delivery == Delivery::Auto && tasks_.empty() && QThread::currentThread() == thread()) {
      lock.unlock();
      task();
      return;
    }
    tasks_.push_back(std::move(task));
    wake = !wakePending_;
    wakePending_ = true;
  }
  if (wake) {
    // Invoked by name, so Qt builds the queued call inside QtCore: no object
    // of ours (a functor slot object) is written here and read on the other thread.
    static const QMetaMethod drainMethod = staticMetaObject.method(staticMetaObject.indexOfMethod("drain()"));
    drainMethod.invoke(this, Qt::QueuedConnection);
  }
}

void Mailbox::close() {
  std::deque<std::function<void()>> dropped;
  std::lock_guard lock(mutex_);
  closed_ = true;
  dropped.swap(tasks_);
}

void Mailbox::drain() {
  {
    std::lock_guard lock(mutex_);
    wakePending_ = false;
  }
  for (;;) {
    std::function<void()> task;
    {
      std::lock_guard lock(mutex_);
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace gbui
