// `glassbox-cli serve` as a process: it prints its address, greedy tokens over
// HTTP equal `glassbox-cli generate` for the same prompt (raw HTTP and through
// `generate --remote`), and SIGTERM stops it cleanly (exit code 0). Loopback
// only, a free port picked by the server.
#include <httplib.h>

#include <cmath>
#include <csignal>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_runner.h"
#include "gb_test.h"

namespace {

struct ServeProcess {
  pid_t pid = -1;
  std::string address;  // "http://127.0.0.1:PORT"
  int port = 0;

  explicit ServeProcess(const std::string& model) {
    int out[2];
    if (::pipe(out) != 0) return;
    pid = ::fork();
    if (pid == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      ::close(out[0]);
      ::close(out[1]);
      ::execl(GLASSBOX_CLI_PATH, GLASSBOX_CLI_PATH, "serve", "--model", model.c_str(), "--port", "0", "--threads", "1",
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(out[1]);
    std::string line;
    char c;
    while (::read(out[0], &c, 1) == 1 && c != '\n') line += c;  // the "listening on" line
    ::close(out[0]);
    const size_t at = line.find("http://");
    if (at == std::string::npos) return;
    address = line.substr(at, line.find(' ', at) - at);
    port = std::stoi(address.substr(address.rfind(':') + 1));
  }
  int stop() {
    if (pid <= 0) return -1;
    ::kill(pid, SIGTERM);
    int status = 0;
    ::waitpid(pid, &status, 0);
    pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  ~ServeProcess() { stop(); }
};

}  // namespace

GB_TEST(greedy_over_http_equals_generate) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const std::string prompt = "Once upon a time";
  const auto gen = gbtest::run_cli("generate --model '" + model + "' --prompt '" + prompt + "' --max-tokens 48 --json", false);
  QCOMPARE(gen.exit_code, 0);
  std::string want;
  std::vector<std::string> want_tokens;
  std::istringstream lines(gen.output);
  for (std::string line; std::getline(lines, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.contains("done")) want = j["text"].get<std::string>();
  }
  QVERIFY(!want.empty());

  ServeProcess serve(model);
  QVERIFY2(serve.port > 0, "serve did not print its address");
  QVERIFY(serve.address.rfind("http://127.0.0.1:", 0) == 0);  // loopback by default
  httplib::Client client("127.0.0.1", serve.port);
  client.set_read_timeout(120, 0);
  const nlohmann::json body = {{"prompt", prompt}, {"max_tokens", 48}, {"temperature", 0}, {"logprobs", 0}};
  auto r = client.Post("/v1/completions", body.dump(), "application/json");
  QVERIFY(r && r->status == 200);
  const auto j = nlohmann::json::parse(r->body);
  QCOMPARE(j["choices"][0]["text"].get<std::string>(), want);
  // Token by token too: the tokens' bytes join to the same text.
  std::string joined;
  for (const auto& t : j["choices"][0]["logprobs"]["tokens"]) joined += t.get<std::string>();
  QCOMPARE(joined, want);
  // generate --remote: the same greedy text through the remote client, a line per token.
  const auto remote = gbtest::run_cli("generate --remote " + serve.address + "/v1 --prompt '" + prompt +
                                      "' --max-tokens 48 --json", false);
  QCOMPARE(remote.exit_code, 0);
  std::string remote_text;
  int num_token_lines = 0;
  std::istringstream remote_lines(remote.output);
  for (std::string line; std::getline(remote_lines, line);) {
    const auto out = nlohmann::json::parse(line, nullptr, false);
    if (out.contains("done")) remote_text = out["text"].get<std::string>();
    if (out.contains("top_logprobs")) {
      ++num_token_lines;
      QVERIFY(!out["top_logprobs"].empty());
    }
  }
  QCOMPARE(remote_text, want);
  QVERIFY(num_token_lines > 0);
  const auto both = gbtest::run_cli("generate --remote " + serve.address + " --model '" + model + "' --prompt x");
  QVERIFY(both.exit_code != 0);
  QCOMPARE(serve.stop(), 0);
}

GB_TEST(remote_generate_reports_an_unreachable_server) {
  const auto r = gbtest::run_cli("generate --remote http://127.0.0.1:1 --prompt x");
  QVERIFY(r.exit_code != 0);
  QVERIFY2(r.output.find("cannot connect") != std::string::npos, r.output.c_str());
}

// `score --remote` (echo + logprobs over HTTP) gives the local `score`'s
// per-token log-probabilities and perplexity within float tolerance.
GB_TEST(score_remote_equals_local_score) {
  GB_REQUIRE_SHARED(model, "models/stories260K/stories260K.bin");
  const std::string text_path = gbtest::temp_dir() + "/score.txt";
  {
    std::ofstream f(text_path);
    f << "Once upon a time, there was a little girl named Lily. She loved to play outside.";
  }
  const auto local = gbtest::run_cli("score --model '" + model + "' --text '" + text_path + "' --json --top 5", false);
  QCOMPARE(local.exit_code, 0);
  ServeProcess serve(model);
  QVERIFY2(serve.port > 0, "serve did not print its address");
  const auto remote = gbtest::run_cli("score --remote " + serve.address + " --text '" + text_path + "' --json --top 5", false);
  QCOMPARE(remote.exit_code, 0);
  const auto l = nlohmann::json::parse(local.output, nullptr, false);
  const auto r = nlohmann::json::parse(remote.output, nullptr, false);
  QVERIFY2(l.is_object() && r.is_object(), (local.output + remote.output).c_str());
  QCOMPARE(r["tokens"].size(), l["tokens"].size());
  for (size_t i = 0; i < l["tokens"].size(); ++i)
    QVERIFY(std::abs(r["tokens"][i]["logprob"].get<double>() - l["tokens"][i]["logprob"].get<double>()) < 1e-4);
  QVERIFY(std::abs(r["perplexity"].get<double>() - l["perplexity"].get<double>()) < 1e-3);
  // compare --remote: a greedy lane equals generate's greedy text; a sampled lane diverges somewhere.
  const auto cmp = gbtest::run_cli("compare --remote " + serve.address + " -p 'Once upon a time' -n 16 --samples 2 --json "
                                   "--lane 'greedy={\"temperature\":0}' --lane 'hot={\"temperature\":1.5,\"top_k\":0,\"top_p\":1,\"min_p\":0}'",
                                   false);
  QCOMPARE(cmp.exit_code, 0);
  const auto c = nlohmann::json::parse(cmp.output, nullptr, false);
  QVERIFY2(c.is_object(), cmp.output.c_str());
  const auto gen = gbtest::run_cli("generate --model '" + model + "' --prompt 'Once upon a time' --max-tokens 16 --temperature 0 --no-echo", false);
  QCOMPARE(c["lanes"][0]["samples"][0]["text"].get<std::string>() + "\n", gen.output);
  QCOMPARE(c["lanes"][0]["samples"][1]["text"], c["lanes"][0]["samples"][0]["text"]);
  QCOMPARE(c["lanes"][1]["samples"].size(), size_t{2});
  QCOMPARE(serve.stop(), 0);
}
