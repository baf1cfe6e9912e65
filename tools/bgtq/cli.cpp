#include "cli.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <iostream>

namespace bgtq::cli {

namespace {
bool g_quiet = false;
}

std::vector<command>& registry() {
  static std::vector<command> r;
  return r;
}

registrar::registrar(command c) { registry().push_back(std::move(c)); }

void progress(const std::string& line) {
  if (!g_quiet) {
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  }
}
void set_quiet(bool q) { g_quiet = q; }

args::args(int argc, char** argv, int first, std::vector<std::string> flags) : flag_names_(std::move(flags)) {
  flag_names_.push_back("quiet");
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    std::string name;
    if (a.rfind("--", 0) == 0 && a.size() > 2) {
      name = a.substr(2);
    } else if (a == "-o") {
      name = "o";
    } else {
      positional_.push_back(a);
      continue;
    }
    std::optional<std::string> inline_value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (std::find(flag_names_.begin(), flag_names_.end(), name) != flag_names_.end()) {
      if (inline_value) throw usage_error("option --" + name + " takes no value");
      flags_given_[name] = true;
      continue;
    }
    if (inline_value) {
      values_[name] = *inline_value;
    } else {
      if (i + 1 >= argc) throw usage_error("option " + a + " needs a value");
      values_[name] = argv[++i];
    }
  }
  if (flags_given_.count("quiet")) set_quiet(true);
  used_["quiet"] = true;
}

std::optional<std::string> args::get(const std::string& name) {
  used_[name] = true;
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string args::require(const std::string& name) {
  auto v = get(name);
  if (!v) throw usage_error("missing required option --" + name);
  return *v;
}

std::string args::get_or(const std::string& name, const std::string& def) {
  auto v = get(name);
  return v ? *v : def;
}

long parse_int(const std::string& s, const std::string& what) {
  if (s.empty()) throw usage_error(what + ": empty value");
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (*end != '\0' || errno != 0) throw usage_error(what + ": '" + s + "' is not an integer");
  return v;
}

double parse_double(const std::string& s, const std::string& what) {
  if (s.empty()) throw usage_error(what + ": empty value");
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (*end != '\0') throw usage_error(what + ": '" + s + "' is not a number");
  if (!std::isfinite(v)) throw usage_error(what + ": '" + s + "' is not finite");
  return v;
}

long args::get_int(const std::string& name, long def, long lo, long hi) {
  auto v = get(name);
  if (!v) return def;
  const long x = parse_int(*v, "--" + name);
  if (x < lo || x > hi)
    throw usage_error("--" + name + " " + *v + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

long args::require_int(const std::string& name, long lo, long hi) {
  const std::string s = require(name);
  const long x = parse_int(s, "--" + name);
  if (x < lo || x > hi)
    throw usage_error("--" + name + " " + s + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

double args::get_double(const std::string& name, double def, double lo, double hi) {
  auto v = get(name);
  if (!v) return def;
  const double x = parse_double(*v, "--" + name);
  if (x < lo || x > hi) throw usage_error("--" + name + " " + *v + " is out of range");
  return x;
}

double args::require_double(const std::string& name, double lo, double hi) {
  const std::string s = require(name);
  const double x = parse_double(s, "--" + name);
  if (x < lo || x > hi) throw usage_error("--" + name + " " + s + " is out of range");
  return x;
}

bool args::flag(const std::string& name) {
  used_[name] = true;
  return flags_given_.count(name) > 0;
}

std::vector<std::string> args::get_list(const std::string& name, const std::string& def) {
  const std::string s = get_or(name, def);
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == ',') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else if (c != ' ') {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  if (out.empty()) throw usage_error("--" + name + " needs at least one item");
  return out;
}

void args::finish() const {
  for (const auto& [k, v] : values_)
    if (!used_.count(k)) throw usage_error("unknown option --" + k);
  for (const auto& [k, v] : flags_given_)
    if (!used_.count(k)) throw usage_error("unknown option --" + k);
  if (!positional_.empty()) throw usage_error("unexpected argument '" + positional_.front() + "'");
}

}  // namespace bgtq::cli
