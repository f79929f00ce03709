// The workbench serving: the Serve toggle starts the OpenAI server on the
// workbench's own engine (a free loopback port), an HTTP completion is answered,
// the request flows through the same event stream as the chat's (session model,
// Requests table with its token counts), and turning the toggle off stops the
// server. Loopback only; waits are bounded.
#include <httplib.h>

#include <QTableWidget>
#include <QTest>
#include <atomic>
#include <nlohmann/json.hpp>
#include <thread>

#include "gb_qtest_main.h"
#include "bridge/engine_controller.h"
#include "panels/serve_panel.h"
#include "ui_test_support.h"

class UiServeTest : public QObject {
  Q_OBJECT
 private slots:
  void serveToggleAnswersHttpAndListsTheRequest();
};

void UiServeTest::serveToggleAnswersHttpAndListsTheRequest() {
  QTemporaryDir dir;
  auto window = gbuitest::makeWindow(dir);
  QVERIFY(gbuitest::loadStories(*window));
  gbui::ServePanel* panel = window->servePanel();
  QVERIFY(panel != nullptr);
  QCOMPARE(window->panel("serve"), static_cast<QWidget*>(panel));

  QSignalSpy started(window->controller(), &gbui::EngineController::servingStarted);
  QSignalSpy failed(window->controller(), &gbui::EngineController::servingFailed);
  panel->setPort(0);
  panel->setServing(true);
  QVERIFY(QTest::qWaitFor([&] { return !started.isEmpty() || !failed.isEmpty(); }, 10000));
  QVERIFY2(failed.isEmpty(), failed.isEmpty() ? "" : qPrintable(failed.first().first().toString()));
  QVERIFY(QTest::qWaitFor([&] { return !panel->address().isEmpty(); }, 10000));  // the panel's queued slot
  const QString address = panel->address();
  QVERIFY2(address.startsWith("http://127.0.0.1:"), qPrintable(address));
  const int port = address.section(':', -1).toInt();
  QVERIFY(port > 0);

  std::atomic<bool> done{false};
  int status = -1;
  nlohmann::json body;
  std::thread client([&] {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(60, 0);
    auto r = c.Post("/v1/completions", R"({"prompt": "Once upon a time", "max_tokens": 12, "temperature": 0, "ignore_eos": true})",
                    "application/json");
    if (r) {
      status = r->status;
      body = nlohmann::json::parse(r->body, nullptr, false);
    }
    done = true;
  });
  const bool answered = QTest::qWaitFor([&] { return done.load(); }, 60000);
  client.join();
  QVERIFY(answered);
  QCOMPARE(status, 200);
  QCOMPARE(body["usage"]["completion_tokens"].get<int>(), 12);

  // The HTTP request is an engine request like the chat's: the session model
  // and the Requests table have it.
  QVERIFY(QTest::qWaitFor([&] { return panel->numRequestRows() == 1 && panel->requestCell(0, 1) == "max_tokens"; }, 10000));
  QCOMPARE(panel->requestCell(0, 3), QString("12"));
  QCOMPARE(panel->requestCell(0, 2), QString::number(body["usage"]["prompt_tokens"].get<int>()));
  const quint64 id = panel->requestCell(0, 0).toULongLong();
  QVERIFY(window->sessionModel()->request(id) != nullptr);
  // Selecting its row puts its first token in the inspector.
  panel->findChild<QTableWidget*>()->selectRow(0);
  QVERIFY(window->sessionModel()->selectedToken().has_value());
  QCOMPARE(window->sessionModel()->selectedToken()->first, id);

  panel->setServing(false);
  QVERIFY(QTest::qWaitFor([&] { return panel->address().isEmpty(); }, 10000));
  httplib::Client gone("127.0.0.1", port);
  gone.set_connection_timeout(2, 0);
  QVERIFY(!gone.Get("/health"));  // nobody listens any more
}

GB_QTEST_MAIN(UiServeTest);
#include "ui_serve_test.moc"
