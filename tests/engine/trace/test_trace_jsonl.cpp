// JSON Lines files: export -> import -> export is byte-identical; each line
// starts with its type; every line passes the strict validator; the importer's
// errors carry FILE:LINE and the problem; writes are atomic, so a failed write
// (forced at every stage, or an unwritable directory) leaves the old file intact.
#include <dirent.h>
#include <bit>
#include <random>
#include <set>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gb_test.h"
#include "trace/trace_json.h"
#include "trace/trace_header_fields.h"
#include "trace/trace_jsonl.h"
#include "trace/trace_schema.h"
#include "trace_test_events.h"

namespace {

gb::TraceHeader sample_header() {
  gb::TraceHeader h;
  h.schema_version = gb::kTraceSchemaVersion;
  h.engine_version = "0.1.0";
  h.created = "2025-01-02T03:04:05Z";
  h.seed = 42;
  h.model.path = "/models/stories260K.bin";
  h.model.name = "stories260K";
  h.model.sha256 = std::string(64, 'a');
  h.model.format = "llama2.c (legacy)";
  h.model.architecture = "llama";
  h.model.config.dim = 64;
  h.model.config.num_layers = 5;
  h.model.config.rms_eps = 1e-5f;
  h.tokenizer = {"llama2c", "/models/tok512.bin", 512, 1, 2};
  h.sampler_settings = R"({"seed":42,"temperature":0.8})";
  return h;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

size_t count_files(const std::string& dir) {
  size_t n = 0;
  DIR* d = ::opendir(dir.c_str());
  while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
  ::closedir(d);
  return n;
}

void expect_import_error(const std::string& text, const std::string& expect) {
  auto r = gb::parse_trace_jsonl(text, "t.jsonl");
  QVERIFY2(!r.ok(), expect.c_str());
  QVERIFY2(r.error().message.find(expect) != std::string::npos, r.error().message.c_str());
}

}  // namespace

GB_TEST(export_import_export_is_byte_identical) {
  const auto events = gbtest::every_event_type();
  const std::string path = gbtest::temp_dir() + "/trace.jsonl";
  QVERIFY(gb::write_trace_jsonl(path, sample_header(), events).ok());
  const std::string first = gbtest::read_text(path);
  auto file = gb::read_trace_jsonl(path);
  QVERIFY2(file.ok(), file.ok() ? "" : file.error().message.c_str());
  QCOMPARE(file.value().events.size(), events.size());
  for (size_t i = 0; i < events.size(); ++i) QVERIFY(gb::trace_events_equal(events[i], file.value().events[i]));
  QCOMPARE(file.value().header.model.name, std::string("stories260K"));
  QCOMPARE(file.value().header.seed, uint64_t{42});
  QCOMPARE(file.value().header.model.config.rms_eps, 1e-5f);
  const std::string path2 = gbtest::temp_dir() + "/trace2.jsonl";
  QVERIFY(gb::write_trace_jsonl(path2, file.value().header, file.value().events).ok());
  QVERIFY(first == gbtest::read_text(path2));
}

// The direct writer (trace_json_line.cpp) against the tree it replaces, for
// every event type and for random token records -- random float bit patterns
// (NaN, infinities, denormals, -0 included), every control character, quotes
// and backslashes, text that is not UTF-8 (the _hex twin), empty lists. The
// same bytes except in how a number is spelt (the tree's dump prints a float's
// double with Grisu2, which is not always the shortest form the direct writer
// uses), and the same values: every number parses to the same double.
GB_TEST(direct_event_lines_equal_the_json_tree_dump) {
  const auto same_line = [](const std::string& direct, const std::string& tree) {
    return gbtest::same_json_line(direct, tree) && nlohmann::json::parse(direct) == nlohmann::json::parse(tree);
  };
  for (const gb::TraceEvent& e : gbtest::every_event_type()) {
    const std::string direct = gb::trace_event_line(e), tree = gb::trace_event_line_from_tree(e);
    QVERIFY2(same_line(direct, tree), (direct + "\n" + tree).c_str());
  }
  std::mt19937_64 rng(20261202);
  const auto any_float = [&] { return std::bit_cast<float>(static_cast<uint32_t>(rng())); };
  const auto any_double = [&] { return rng() % 4 == 0 ? std::bit_cast<double>(rng()) : static_cast<double>(any_float()); };
  const auto any_text = [&] {
    std::string t;
    const size_t n = rng() % 12;
    for (size_t i = 0; i < n; ++i) {
      switch (rng() % 4) {
        case 0: t += static_cast<char>(rng() % 0x20); break;                      // control characters
        case 1: t += "\\\"\x7f/"[rng() % 4]; break;                          // escapes and DEL
        case 2: t += rng() % 2 ? "\xc3\xa9" : "\xe2\x82\xac"; break;          // UTF-8
        default: t += static_cast<char>(rng() % 256); break;                      // maybe not UTF-8
      }
    }
    return t;
  };
  for (int round = 0; round < 300; ++round) {
    gb::TokenSampledEvent t;
    t.request = gb::RequestId{rng()};
    t.step = static_cast<int64_t>(rng());
    t.position = static_cast<int32_t>(rng());
    t.index = static_cast<int32_t>(rng() % 1000);
    t.token = static_cast<int32_t>(rng() % 32000);
    t.text = any_text();
    t.origin = static_cast<gb::TokenOrigin>(rng() % 5);
    gb::TokenRecord& r = t.record;
    const size_t stages = rng() % 10, top = rng() % 21;
    for (size_t s = 0; s < stages; ++s) {
      r.stages.push_back(static_cast<gb::SamplerStage>(rng() % gb::kNumSamplerStages));
      r.stage_active.push_back(static_cast<uint8_t>(rng() % 2));
      r.num_candidates_after_stage.push_back(static_cast<int32_t>(rng() % 32000));
    }
    for (size_t c = 0; c < top; ++c) {
      gb::CandidateRecord cr;
      cr.id = static_cast<int32_t>(rng() % 32000);
      cr.logit = any_float();
      cr.prob_before = any_float();
      for (size_t s = 0; s < stages; ++s) cr.prob_after_stage.push_back(any_float());
      cr.removed_by_stage = static_cast<int>(rng() % 11) - 1;
      r.top.push_back(cr);
    }
    r.num_candidates_before = static_cast<int32_t>(rng() % 32000);
    r.entropy_before = any_float();
    r.entropy_after = any_float();
    r.chosen = static_cast<int32_t>(rng() % 32000);
    r.chosen_logit = any_float();
    r.chosen_prob_before = any_float();
    r.chosen_prob = any_float();
    r.chosen_rank = static_cast<int32_t>(rng() % 100) - 1;
    r.rng_counter = rng();
    r.draw = any_double();
    r.xtc_draw = any_double();
    r.xtc_fired = rng() % 2 == 0;
    r.forward_ms = any_double();
    r.sample_ms = any_double();
    const gb::TraceEvent e{rng(), static_cast<int64_t>(rng()), t};
    const std::string direct = gb::trace_event_line(e), tree = gb::trace_event_line_from_tree(e);
    QVERIFY2(same_line(direct, tree), (direct + "\n" + tree).c_str());
  }
}

GB_TEST(lines_lead_with_type_and_pass_the_validator) {
  const std::string text = gb::format_trace_jsonl(sample_header(), gbtest::every_event_type());
  const auto lines = lines_of(text);
  QCOMPARE(lines.size(), size_t{18});
  QVERIFY2(lines[0].rfind(R"({"type":"header","format":"glassbox-trace","schema_version":1,)", 0) == 0, lines[0].c_str());
  QVERIFY2(lines[1].rfind(R"({"type":"request_submitted","seq":0,"t_us":0,)", 0) == 0, lines[1].c_str());
  for (const std::string& line : lines) {
    const gb::Status s = gb::validate_trace_json_line(nlohmann::json::parse(line));
    QVERIFY2(s.ok(), s.ok() ? "" : (s.error().message + " in " + line).c_str());
  }
  // The header embeds the sampler settings as an object, not a string.
  QVERIFY(nlohmann::json::parse(lines[0])["sampler_settings"].is_object());
}

// The workbench's branch tree rides in the header ("branches", optional): kept
// through export -> import -> export, validated strictly, and a file without it
// (every trace written before it existed) still reads, with no tree.
GB_TEST(branch_tree_in_the_header_round_trips_and_is_optional) {
  gb::TraceHeader h = sample_header();
  const nlohmann::json tree = {
      {"nodes",
       {{{"request", 1}, {"parent", nullptr}, {"fork_position", 0}, {"fork_token", nullptr}, {"fork_prob", nullptr},
         {"prompt_ids", {1, 400}}, {"token_ids", {5, 6}}, {"token_texts", {"a", "b"}}, {"token_probs", {0.5, 0.25}},
         {"text", "ab"}, {"seed", 7}, {"reason", "max_tokens"}, {"current", false}},
        {{"request", 3}, {"parent", 1}, {"fork_position", 3}, {"fork_token", 9}, {"fork_prob", 0.125},
         {"prompt_ids", {1, 400, 5}}, {"token_ids", {9}}, {"token_texts", {"c"}}, {"token_probs", {0.125}},
         {"text", "c"}, {"seed", -1}, {"reason", "stop"}, {"current", true}}}},
      {"conversation", {{"system", ""}, {"turns", nlohmann::json::array()}}}};
  h.branches = tree.dump();
  const std::string text = gb::format_trace_jsonl(h, gbtest::every_event_type());
  const auto header_line = nlohmann::json::parse(lines_of(text)[0]);
  QVERIFY(gb::validate_trace_json_line(header_line).ok());
  QCOMPARE(header_line["branches"], tree);
  auto file = gb::parse_trace_jsonl(text, "t.jsonl");
  QVERIFY2(file.ok(), file.ok() ? "" : file.error().message.c_str());
  QCOMPARE(nlohmann::json::parse(file.value().header.branches), tree);
  QVERIFY(gb::format_trace_jsonl(file.value().header, file.value().events) == text);
  // A node that breaks the schema is caught by the validator.
  nlohmann::json bad = header_line;
  bad["branches"]["nodes"][1].erase("fork_position");
  QVERIFY(!gb::validate_trace_json_line(bad).ok());
  bad = header_line;
  bad["branches"]["nodes"][0]["token_probs"] = "x";
  QVERIFY(!gb::validate_trace_json_line(bad).ok());
  // Without a tree: no key in the header, and the reader gives "".
  const std::string plain = gb::format_trace_jsonl(sample_header(), gbtest::every_event_type());
  QVERIFY(!nlohmann::json::parse(lines_of(plain)[0]).contains("branches"));
  auto old = gb::parse_trace_jsonl(plain, "t.jsonl");
  QVERIFY(old.ok());
  QVERIFY(old.value().header.branches.empty());
}

GB_TEST(importer_reports_file_line_and_problem) {
  const std::string header = gb::trace_header_line(sample_header()) + "\n";
  const auto events = gbtest::every_event_type();
  const std::string e0 = gb::trace_event_line(events[0]) + "\n";
  const std::string e1 = gb::trace_event_line(events[1]) + "\n";
  expect_import_error("", "t.jsonl: empty trace");
  expect_import_error(e0, "t.jsonl:1: expected the header line");
  expect_import_error(header + e0 + "{\"type\":\"step\",\n", "t.jsonl:3: not valid JSON");
  expect_import_error(header + e0 + "[1,2]\n", "t.jsonl:3: expected a JSON object");
  // A number too large for a double is an error of its line, not an exception
  // out of the reader (found by fuzz_trace_jsonl: nlohmann throws out_of_range).
  expect_import_error(header + e0 + R"({"type":"step","seq":2,"t_us":1e999})" "\n", "t.jsonl:3: not valid JSON");
  expect_import_error(header + "\n" + e0, "t.jsonl:2: empty line");
  expect_import_error(header + R"({"type":"teleport","seq":1,"t_us":0})" "\n",
                      "t.jsonl:2: unknown event type \"teleport\"");
  expect_import_error(header + e1 + e0, "t.jsonl:3: seq 0 after seq 1: events out of order");
  std::string bad_field = e0;
  bad_field.replace(bad_field.find("\"max_tokens\":64"), 15, "\"max_tokens\":\"64\"");
  expect_import_error(header + bad_field, "t.jsonl:2: request_submitted: max_tokens: expected an integer");

  gb::TraceHeader newer = sample_header();
  newer.schema_version = gb::kTraceSchemaVersion + 1;
  expect_import_error(gb::trace_header_line(newer) + "\n" + e0, "t.jsonl:1: trace schema version 2 is newer");
  std::string wrong_format = header;
  wrong_format.replace(wrong_format.find("glassbox-trace"), 14, "other-trace");
  expect_import_error(wrong_format, "t.jsonl:1: header.format: expected \"glassbox-trace\"");

  // A missing final newline and CRLF line ends are accepted.
  auto crlf = gb::parse_trace_jsonl(header.substr(0, header.size() - 1) + "\r\n" + e0.substr(0, e0.size() - 1), "t");
  QVERIFY2(crlf.ok(), crlf.ok() ? "" : crlf.error().message.c_str());
  QCOMPARE(crlf.value().events.size(), size_t{1});
  auto missing = gb::read_trace_jsonl(gbtest::temp_dir() + "/none.jsonl");
  QVERIFY(!missing.ok());
  QVERIFY(missing.error().message.find("none.jsonl: cannot open") != std::string::npos);
}

GB_TEST(failed_write_at_any_stage_keeps_the_old_file) {
  const std::string dir = gbtest::temp_dir() + "/atomic";
  ::mkdir(dir.c_str(), 0755);
  const std::string path = dir + "/trace.jsonl";
  QVERIFY(gb::write_file_atomically(path, "old contents\n").ok());
  for (auto stage : {gb::AtomicWriteStage::Open, gb::AtomicWriteStage::Write, gb::AtomicWriteStage::Sync,
                     gb::AtomicWriteStage::Rename}) {
    const gb::Status s = gb::write_trace_jsonl(path, sample_header(), gbtest::every_event_type(),
                                               [stage](gb::AtomicWriteStage at) { return at != stage; });
    QVERIFY(!s.ok());
    QVERIFY2(s.error().message.rfind(path + ": ", 0) == 0, s.error().message.c_str());
    QCOMPARE(gbtest::read_text(path), std::string("old contents\n"));
    QCOMPARE(count_files(dir), size_t{1});  // the temporary file was removed
  }
  QVERIFY(gb::write_trace_jsonl(path, sample_header(), {}).ok());
  QVERIFY(gbtest::read_text(path).rfind("{\"type\":\"header\"", 0) == 0);
  QCOMPARE(count_files(dir), size_t{1});
}

// Directory permissions do not stop root, so as root (CI) the write runs in a
// child process that has become the unprivileged user nobody (65534).
GB_TEST(unwritable_directory_keeps_the_old_file) {
  const std::string base = gbtest::temp_dir();
  const std::string dir = base + "/readonly";
  ::mkdir(dir.c_str(), 0755);
  const std::string path = dir + "/trace.jsonl";
  QVERIFY(gb::write_file_atomically(path, "old\n").ok());
  ::chmod(dir.c_str(), 0555);
  // The write that must fail, and what it must leave: "" when it behaved.
  const auto attempt = [&]() -> std::string {
    const gb::Status s = gb::write_trace_jsonl(path, sample_header(), gbtest::every_event_type());
    if (s.ok()) return "the write into a read-only directory succeeded";
    if (s.error().message.find("cannot create temporary file") == std::string::npos) return s.error().message;
    if (gbtest::read_text(path) != "old\n") return "the old file changed";
    return {};
  };
  std::string failure;
  if (::geteuid() != 0) {
    failure = attempt();
  } else {
    ::chmod(base.c_str(), 0755);  // nobody may walk to the directory
    std::fflush(nullptr);
    const pid_t child = ::fork();
    QVERIFY(child >= 0);
    if (child == 0) {
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(3);
      const std::string why = attempt();
      if (!why.empty()) std::fprintf(stderr, "as nobody: %s\n", why.c_str());
      ::_exit(why.empty() ? 0 : 1);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      failure = "the unprivileged child exited with " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                " (3: could not become nobody)";
  }
  ::chmod(dir.c_str(), 0755);
  QVERIFY2(failure.empty(), failure.c_str());
}

namespace {

namespace hf = gb::trace_header_fields;

// Gives every listed member a value unlike its default and unlike the others'
// (text ones are not UTF-8, so their _hex twins are exercised too).
template <class T, class List>
void set_every_field(T& value, const List& list, int& counter) {
  hf::for_each(list, [&](const auto& f) {
    using M = typename std::remove_cvref_t<decltype(f)>::member_type;
    M& m = value.*f.ptr;
    ++counter;
    if constexpr (std::is_same_v<M, std::string>)
      m = "v" + std::to_string(counter) + (f.form == gb::trace_fields::Form::Text ? "\xff" : "");
    else if constexpr (std::is_same_v<M, float>) m = 0.25f + static_cast<float>(counter);
    else if constexpr (std::is_same_v<M, bool>) m = !m;
    else m = 1000 + counter;
  });
}

// Names each listed member that differs (empty: none).
template <class T, class List>
std::string differing_fields(const T& a, const T& b, const List& list) {
  std::string out;
  hf::for_each(list, [&](const auto& f) {
    if (!(a.*f.ptr == b.*f.ptr)) out += std::string(f.name) + " ";
  });
  return out;
}

// Every key of a written object, without the _hex twins.
std::set<std::string> keys_of(const nlohmann::json& object) {
  std::set<std::string> out;
  for (auto it = object.begin(); it != object.end(); ++it)
    if (!it.key().ends_with("_hex")) out.insert(it.key());
  return out;
}

template <class List>
void add_names(std::set<std::string>& names, const List& list) {
  hf::for_each(list, [&](const auto& f) { names.insert(std::string(f.name)); });
}

// Changes one listed member at a time; same_recorded_header must notice each.
template <class List, class Get>
void check_each_field_counts(const gb::TraceHeader& h, const List& list, Get get) {
  hf::for_each(list, [&](const auto& f) {
    using M = typename std::remove_cvref_t<decltype(f)>::member_type;
    gb::TraceHeader changed = h;
    M& m = get(changed).*f.ptr;
    if constexpr (std::is_same_v<M, std::string>) m += "x";
    else if constexpr (std::is_same_v<M, bool>) m = !m;
    else m = m + 1;
    QVERIFY2(!gb::same_recorded_header(changed, h), (std::string(f.name) + " is not compared").c_str());
  });
}

}  // namespace

// The header's model and tokenizer fields are listed once
// (trace/trace_header_fields.h). Every listed field, set to a value unlike its
// default, is written, read back and compared; the written objects hold exactly
// the listed keys; the strict schema accepts the line. A field the writer,
// reader, schema or equality skipped fails here by name.
GB_TEST(header_round_trip_covers_every_listed_field) {
  gb::TraceHeader h = sample_header();
  int counter = 0;
  set_every_field(h.model, hf::kModelInfoFields, counter);
  set_every_field(h.model.config, hf::kModelConfigFields, counter);
  set_every_field(h.tokenizer, hf::kTokenizerFields, counter);
  h.kv_block_size = 32;
  h.kv_num_blocks = 77;
  h.kv_types = "q8_0/f16";
  const nlohmann::json j = gb::trace_header_to_json(h);
  QVERIFY(gb::validate_trace_json_line(j).ok());

  std::set<std::string> model_names, tokenizer_names;
  add_names(model_names, hf::kModelInfoFields);
  add_names(model_names, hf::kModelConfigFields);
  add_names(tokenizer_names, hf::kTokenizerFields);
  QVERIFY(keys_of(j["model"]) == model_names);
  QVERIFY(keys_of(j["tokenizer"]) == tokenizer_names);
  QVERIFY(j["model"].contains("path_hex") && j["tokenizer"].contains("path_hex"));

  auto back = gb::trace_header_from_json(j);
  QVERIFY2(back.ok(), back.ok() ? "" : back.error().message.c_str());
  const std::string diff = differing_fields(back->model, h.model, hf::kModelInfoFields) +
                           differing_fields(back->model.config, h.model.config, hf::kModelConfigFields) +
                           differing_fields(back->tokenizer, h.tokenizer, hf::kTokenizerFields);
  QVERIFY2(diff.empty(), ("lost on the way back: " + diff).c_str());
  QCOMPARE(back->model.config.architecture, h.model.architecture);
  QVERIFY(gb::same_recorded_header(*back, h));

  check_each_field_counts(h, hf::kModelInfoFields, [](gb::TraceHeader& x) -> gb::TraceModelInfo& { return x.model; });
  check_each_field_counts(h, hf::kModelConfigFields, [](gb::TraceHeader& x) -> gb::ModelConfig& { return x.model.config; });
  check_each_field_counts(h, hf::kTokenizerFields, [](gb::TraceHeader& x) -> gb::TraceTokenizerInfo& { return x.tokenizer; });
}
