// The documentation cannot rot: every code block of README.md and docs/integration.md is
// classified and checked. C++ blocks must equal a snippet of a compiled example byte for
// byte; shell blocks are executed, in order, in a scratch folder (with build/ linked in,
// on small synthetic data); Python blocks are syntax-checked; the README's CLI table
// lists every command and its examples run; local links and images resolve.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <sys/wait.h>

#include <bgtq/io/npy.hpp>
#include <bgtq/synth/synth.hpp>

#include "common.hpp"
#include "markdown.hpp"
#include "plot/xml_check.hpp"

namespace fs = std::filesystem;
using bgtq_docs::code_block;

namespace {

const std::string src = BGTQ_SOURCE_DIR;
const std::vector<std::string> checked_docs = {"README.md", "docs/integration.md"};

std::vector<code_block> blocks_of(const std::string& doc) { return bgtq_docs::code_blocks(bgtq_docs::read_file(src + "/" + doc)); }

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

int run_shell(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  return rc == -1 ? -1 : WEXITSTATUS(rc);
}

std::string tail(const std::string& path, std::size_t n = 4000) {
  std::string s;
  try {
    s = bgtq_docs::read_file(path);
  } catch (...) {
    return "(no log)";
  }
  return s.size() > n ? s.substr(s.size() - n) : s;
}

// A fresh scratch folder where `build/` is the real build tree and, when the real-data
// folder exists, `../shared/data` resolves to it (as it does from the repository root).
std::string make_work(const std::string& name) {
  const fs::path root = fs::path(BGTQ_BIN_DIR).parent_path() / "docs-work";
  const fs::path work = root / name;
  fs::remove_all(work);
  fs::create_directories(work);
  fs::create_directory_symlink(fs::path(BGTQ_BIN_DIR).parent_path(), work / "build");
  const fs::path data = BGTQ_TEST_DATA_DIR;
  std::error_code ec;
  if (fs::is_directory(data) && !fs::exists(root / "shared")) fs::create_directory_symlink(data.parent_path(), root / "shared", ec);
  return work.string();
}

// Runs the executable shell blocks of `doc` as one bash script in a fresh scratch folder.
void run_shell_blocks(const std::string& doc, const std::string& work_name, int min_blocks) {
  std::string script = "set -euo pipefail\n";
  int n = 0;
  for (const auto& b : blocks_of(doc)) {
    if (b.lang != "sh" || starts_with(b.annotation, "not executed")) continue;
    script += "# --- " + doc + " line " + std::to_string(b.line) + "\n" + b.text;
    ++n;
  }
  REQUIRE(n >= min_blocks);
  const std::string work = make_work(work_name);
  {
    std::ofstream(work + "/blocks.sh") << script;
  }
  const int rc = run_shell("cd '" + work + "' && bash blocks.sh > log.txt 2>&1");
  INFO("script:\n" << script << "\noutput (tail):\n" << tail(work + "/log.txt"));
  REQUIRE(rc == 0);
}

// A synthetic dump (post-RoPE, half pairing) in dir: [L,T,H,D] files, or [T,H,D] ones
// holding its first layer when three_d.
void write_dump(const std::string& dir, int layers, int tokens, bool three_d = false) {
  bgtq::synth_config sc;
  sc.layers = layers;
  sc.tokens = tokens;
  sc.q_heads = 8;
  sc.kv_heads = 2;
  sc.rope = bgtq::rope_layout(128, bgtq::rope_pairing::half);
  const bgtq::synth_data d = bgtq::generate_synth(sc);
  const std::size_t L = std::size_t(layers), T = std::size_t(tokens), D = 128;
  const auto shape = [&](std::size_t h) {
    return three_d ? std::vector<std::size_t>{T, h, D} : std::vector<std::size_t>{L, T, h, D};
  };
  fs::create_directories(dir);
  bgtq::write_npy(dir + "/q.npy", d.q.data(), shape(8));
  bgtq::write_npy(dir + "/k.npy", d.k.data(), shape(2));
  bgtq::write_npy(dir + "/v.npy", d.v.data(), shape(2));
}

// Runs build/bin/integration_engine on dir (skips when the examples are not built); its
// stdout and stderr go to `log`.
int run_engine(const std::string& dir, const std::string& log) {
  const std::string bin = std::string(BGTQ_BIN_DIR) + "/integration_engine";
  if (!fs::exists(bin)) bgtq_test::skip_test(bin + " is not built");
  return run_shell("'" + bin + "' '" + dir + "' > '" + log + "' 2>&1");
}

}  // namespace

TEST_CASE("every code block of the checked docs is classified", "[docs]") {
  for (const auto& doc : checked_docs) {
    const auto blocks = blocks_of(doc);
    REQUIRE(!blocks.empty());
    for (const auto& b : blocks) {
      INFO(doc << " line " << b.line << ": ```" << b.lang << " (annotation '" << b.annotation << "')");
      const bool known = b.lang == "sh" || b.lang == "cpp" || b.lang == "python" || b.lang == "text";
      CHECK(known);  // sh: executed, cpp: snippet of an example, python: syntax-checked, text: output
      if (b.lang == "cpp") CHECK(starts_with(b.annotation, "snippet: "));
      if (b.lang == "python") CHECK(starts_with(b.annotation, "not executed"));
      if (starts_with(b.annotation, "not executed")) CHECK(b.annotation.size() > std::string("not executed: ").size());
    }
  }
}

TEST_CASE("C++ blocks equal the example sources byte for byte", "[docs]") {
  std::set<std::string> used;  // "path#name"
  int n = 0;
  for (const auto& doc : checked_docs)
    for (const auto& b : blocks_of(doc)) {
      if (b.lang != "cpp") continue;
      const std::string ref = b.annotation.substr(std::string("snippet: ").size());
      const auto hash = ref.find('#');
      REQUIRE(hash != std::string::npos);
      const std::string path = ref.substr(0, hash), name = ref.substr(hash + 1);
      INFO(doc << " line " << b.line << " shows " << ref);
      const std::string want = bgtq_docs::snippet(bgtq_docs::read_file(src + "/" + path), name, path);
      if (b.text != want) {
        const auto a = bgtq_docs::split_lines(b.text), w = bgtq_docs::split_lines(want);
        std::size_t i = 0;
        while (i < a.size() && i < w.size() && a[i] == w[i]) ++i;
        FAIL_CHECK("first difference at snippet line " << i + 1 << ":\n  doc:     "
                                                        << (i < a.size() ? a[i] : "(end)") << "\n  example: "
                                                        << (i < w.size() ? w[i] : "(end)"));
      }
      used.insert(ref);
      ++n;
    }
  CHECK(n >= 6);
  // and no snippet in the examples is left out of the docs
  for (const char* dir : {"examples/quickstart", "examples/integration"})
    for (const auto& e : fs::directory_iterator(src + "/" + dir)) {
      if (e.path().extension() != ".cpp") continue;
      const std::string rel = std::string(dir) + "/" + e.path().filename().string();
      for (const auto& name : bgtq_docs::snippet_names(bgtq_docs::read_file(e.path().string()))) {
        INFO(rel << "#" << name);
        CHECK(used.count(rel + "#" + name) == 1);
      }
    }
}

TEST_CASE("snippet extraction: segments, dedent, errors", "[docs]") {
  const std::string s = "x\n  // example-begin a\n  int i;\n\n    f(i);\n  // example-end a\n  g();\n"
                        "    // example-begin a\n  }\n    // example-end a\n";
  CHECK(bgtq_docs::snippet(s, "a") == "int i;\n\n  f(i);\n}\n");
  CHECK_THROWS(bgtq_docs::snippet(s, "b"));
  CHECK_THROWS(bgtq_docs::snippet("  // example-begin a\nx\n", "a"));             // never closed
  CHECK_THROWS(bgtq_docs::snippet("    // example-begin a\n  x\n    // example-end a\n", "a"));  // under-indented
  const auto blocks = bgtq_docs::code_blocks("a\n<!-- snippet: f#n -->\n\n```cpp\nint x;\n```\n```sh\nls\n```\n");
  REQUIRE(blocks.size() == 2u);
  CHECK(blocks[0].annotation == "snippet: f#n");
  CHECK(blocks[0].text == "int x;\n");
  CHECK(blocks[1].annotation.empty());
  CHECK_THROWS(bgtq_docs::code_blocks("```sh\nls\n"));
}

TEST_CASE("Python blocks are valid Python (syntax only: they need torch)", "[docs]") {
  if (run_shell("command -v python3 > /dev/null 2>&1") != 0) bgtq_test::skip_test("python3 is not installed");
  const std::string work = make_work("python");
  int n = 0;
  for (const auto& doc : checked_docs)
    for (const auto& b : blocks_of(doc)) {
      if (b.lang != "python") continue;
      const std::string f = work + "/block" + std::to_string(n++) + ".py";
      std::ofstream(f) << b.text;
      INFO(doc << " line " << b.line << ":\n" << b.text);
      CHECK(run_shell("python3 -c 'import ast,sys; ast.parse(open(sys.argv[1]).read())' '" + f + "' > /dev/null 2>&1") == 0);
    }
  CHECK(n >= 1);
}

TEST_CASE("docs/integration.md: shell blocks run", "[docs]") { run_shell_blocks("docs/integration.md", "integration", 2); }

TEST_CASE("README.md: shell blocks run", "[docs]") { run_shell_blocks("README.md", "readme", 2); }

TEST_CASE("README.md: every command has a row in the CLI table and its example runs", "[docs]") {
  // rows run in table order in a fresh folder: `synth` makes tour/, `calibrate` the plan, ...
  const std::string work = make_work("readme-table");
  const bool have_data = fs::is_directory(BGTQ_TEST_DATA_DIR);
  // the CLI table: one row per command, examples as inline code starting with build/bin/bgtq
  std::set<std::string> rows;
  int ran = 0, skipped = 0;
  for (const auto& line : bgtq_docs::split_lines(bgtq_docs::read_file(src + "/README.md"))) {
    if (!starts_with(line, "| `bgtq ")) continue;
    const auto codes = bgtq_docs::inline_code(line);
    rows.insert(codes.front().substr(5, codes.front().find(' ', 5) - 5));
    for (std::string c : codes) {
      if (c.find("build/bin/bgtq ") == std::string::npos) continue;
      for (auto p = c.find("\\|"); p != std::string::npos; p = c.find("\\|", p)) c.erase(p, 1);  // table escape
      if (c.find("../shared/data") != std::string::npos && !have_data) {
        ++skipped;
        continue;
      }
      const int rc = run_shell("cd '" + work + "' && " + c + " > table.log 2>&1");
      INFO("README table example: " << c << "\n" << tail(work + "/table.log"));
      CHECK(rc == 0);
      ++ran;
    }
  }
  if (skipped > 0) WARN(skipped << " README table examples need ../shared/data, absent here: not run");
  INFO(ran << " table examples ran, " << skipped << " need ../shared/data");
  CHECK(ran >= 7);
  // every command `bgtq --help` lists has a row
  const std::string help = work + "/help.txt";
  std::string help_cmd = BGTQ_BIN_DIR;
  help_cmd.append("/bgtq --help > '").append(help).append("' 2>&1");
  REQUIRE(run_shell(help_cmd) == 0);
  bool in_list = false;
  int commands = 0;
  for (const auto& l : bgtq_docs::split_lines(bgtq_docs::read_file(help))) {
    if (l == "commands:") {
      in_list = true;
      continue;
    }
    if (!in_list || bgtq_docs::trim(l).empty()) continue;
    const std::string name = bgtq_docs::trim(l).substr(0, bgtq_docs::trim(l).find(' '));
    INFO("command '" << name << "' of bgtq --help has no row in the README's CLI table");
    CHECK(rows.count(name) == 1);
    ++commands;
  }
  CHECK(commands >= 10);
}

TEST_CASE("local links and images of the docs resolve, images are well-formed SVG", "[docs]") {
  for (const std::string doc : {"README.md", "docs/README.md", "docs/integration.md"}) {
    const fs::path dir = (fs::path(src) / doc).parent_path();
    for (std::string t : bgtq_docs::link_targets(bgtq_docs::read_file(src + "/" + doc))) {
      if (starts_with(t, "http://") || starts_with(t, "https://") || starts_with(t, "#") || starts_with(t, "mailto:")) continue;
      if (const auto h = t.find('#'); h != std::string::npos) t.resize(h);
      const fs::path p = (dir / t).lexically_normal();
      const std::string rel = p.lexically_relative(src).generic_string();
      INFO(doc << " links to " << t << " (" << rel << ")");
      CHECK(fs::exists(p));
      if (p.extension() == ".svg" && fs::exists(p)) {
        const auto r = bgtq_test::check_xml(bgtq_docs::read_file(p.string()));
        INFO(r.error);
        CHECK(r.error.empty());
      }
    }
  }
}

// integration_engine on dumps of other shapes (docs/integration.md, section 3, lists its
// limits): one layer is enough, and input outside the limits or a library error ends the
// program with a message and exit code 1, not an out-of-range read or an abort (134).
TEST_CASE("integration_engine: runs on a one-layer dump", "[docs][examples]") {
  const std::string work = make_work("engine-one-layer");
  write_dump(work + "/one", /*layers=*/1, /*tokens=*/256);
  const int rc = run_engine(work + "/one", work + "/log.txt");
  const std::string log = tail(work + "/log.txt");
  INFO(log);
  CHECK(rc == 0);
  CHECK(log.find("integration example: all checks passed") != std::string::npos);
}

TEST_CASE("integration_engine: refuses input outside its limits, exit 1 with a message", "[docs][examples]") {
  const std::string work = make_work("engine-refusals");
  struct input {
    std::string name, expect;
  };
  write_dump(work + "/three_d", 1, 256, /*three_d=*/true);  // [T,H,D]
  write_dump(work + "/short", 1, 100);                       // T < 132
  write_dump(work + "/no_v", 1, 256);                        // v.npy missing: read_npy throws bgtq::error
  fs::remove(work + "/no_v/v.npy");
  for (const input& in : {input{"three_d", "q.npy and k.npy must be [L,T,Hq,D] and [L,T,Hkv,D] (4-D)"},
                          input{"short", "the example needs at least 132 tokens, the dump has 100"},
                          input{"no_v", "integration example: error (io_error): cannot open"}}) {
    const std::string log_path = work + "/" + in.name + ".log";
    const int rc = run_engine(work + "/" + in.name, log_path);
    const std::string log = tail(log_path);
    INFO(in.name << ":\n" << log);
    CHECK(rc == 1);
    CHECK(log.find(in.expect) != std::string::npos);
  }
}
