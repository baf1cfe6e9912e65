#include "cli.hpp"

#include <bgtq/io/atomic_file.hpp>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <unistd.h>
#include <cmath>
#include <cstdio>
#include <iostream>

namespace bgtq::cli {

namespace {
bool g_quiet = false;

//! "-o" or "--name": an argument that starts another option (so never an option's value;
//! negative numbers such as "-1" are values).
bool looks_like_option(const std::string& a) { return a == "-o" || (a.rfind("--", 0) == 0 && a.size() > 2); }

//! Levenshtein distance of two option names.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::size_t> prev(m + 1), cur(m + 1);
  for (std::size_t j = 0; j <= m; ++j) prev[j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= m; ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0u : 1u)});
    std::swap(prev, cur);
  }
  return prev[m];
}

//! How far `a` is from `b` as a typo: one a prefix of the other ("--avg-bit" for
//! "--avg-bits"; not a compound option built on the other: "rope-base" is its own option,
//! not a typo for "rope") counts as 1; otherwise the edit distance, which must be at most
//! 2, or at most 1 where either name has 3 letters or fewer (any two short names are
//! within 2: "kv" is not a typo for "o"). No match: SIZE_MAX; names of 2 letters or fewer
//! match nothing but a name one edit away.
std::size_t typo_distance(const std::string& a, const std::string& b) {
  constexpr std::size_t none = static_cast<std::size_t>(-1);
  const auto prefix = [](const std::string& longer, const std::string& shorter) {
    return shorter.size() >= 3 && longer.rfind(shorter, 0) == 0 &&
           (longer.size() == shorter.size() || longer[shorter.size()] != '-');
  };
  if (prefix(a, b) || prefix(b, a)) return 1;
  const std::size_t n = a.size(), m = b.size();
  const std::size_t most = std::min(n, m) <= 3 ? 1 : 2;
  if (n > m + most || m > n + most) return none;
  const std::size_t d = edit_distance(a, b);
  return d <= most && d < std::max(n, m) ? d : none;
}
bool near_miss(const std::string& a, const std::string& b) { return typo_distance(a, b) != static_cast<std::size_t>(-1); }
}  // namespace

std::string option_name(const std::string& name) { return name == "o" ? "-o" : "--" + name; }

std::vector<command>& registry() {
  static std::vector<command> r;
  return r;
}

registrar::registrar(command c) { registry().push_back(std::move(c)); }

void check_outputs(const std::vector<named_path>& outputs, const std::vector<named_path>& inputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const named_path& o = outputs[i];
    if (o.path.empty()) throw usage_error(o.option + ": the output path is empty");
    if (o.path == "-")  // not standard output here: it would be a file named '-'
      throw usage_error(o.option + " -: standard output is not an output path here; name a file (/dev/stdout writes there)");
    for (std::size_t j = 0; j < i; ++j)
      if (bgtq::detail::same_target(o.path, outputs[j].path))
        throw usage_error(outputs[j].option + " and " + o.option + " name the same file '" + o.path + "'");
    for (const named_path& in : inputs)
      if (!in.path.empty() && bgtq::detail::same_target(o.path, in.path))
        throw usage_error(o.option + " '" + o.path + "' is the input " + in.option + " (the output would replace it)");
  }
  for (const named_path& o : outputs) bgtq::check_output_path(o.path, o.option);
}

void check_output_dir_files(const std::string& dir, const std::string& option, const std::vector<std::string>& names,
                            const std::vector<named_path>& inputs) {
  namespace fs = std::filesystem;
  if (dir.empty()) throw usage_error(option + ": the output directory is empty");
  std::error_code ec;
  if (fs::is_directory(dir, ec)) {
    std::vector<named_path> outs;
    for (const std::string& n : names) outs.push_back({option + " " + dir + " (" + n + ")", (fs::path(dir) / n).string()});
    check_outputs(outs, inputs);
    return;
  }
  bgtq::check_output_dir(dir, option);  // a file in the way
  // the directory is made when the results are written: its nearest existing ancestor must take it
  fs::path p = fs::absolute(fs::path(dir), ec);
  while (!ec && !fs::exists(p, ec) && p.has_parent_path() && p.parent_path() != p) p = p.parent_path();
  if (!ec && fs::is_directory(p, ec) && ::access(p.c_str(), W_OK | X_OK) != 0)
    bgtq::fail(bgtq::errc::io_error, option + " '" + dir + "': cannot create it: '" + p.string() + "' is not writable");
}

void progress(const std::string& line) {
  if (!g_quiet) {
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  }
}
void set_quiet(bool q) { g_quiet = q; }

void warn(const std::string& cmd, const std::string& text, const std::string& prefix) {
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    if (nl > at)
      std::fprintf(stderr, "bgtq %s: warning: %s%s\n", cmd.c_str(), prefix.c_str(), text.substr(at, nl - at).c_str());
    at = nl + 1;
  }
  std::fflush(stderr);
}

bool takes_next_as_value(const std::string& arg, const std::vector<std::string>& flags) {
  if (!looks_like_option(arg)) return false;
  const std::string name = arg == "-o" ? "o" : arg.substr(2);
  return name.find('=') == std::string::npos && name != "quiet" && std::find(flags.begin(), flags.end(), name) == flags.end();
}

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
    // an option given twice with two values is a mistake more often than an override
    // (`--q q.npy --q k.npy` would calibrate on K as Q): refused, naming both
    const auto set_value = [&](const std::string& v) {
      if (const auto it = values_.find(name); it != values_.end() && it->second != v)
        throw usage_error("option " + option_name(name) + " given twice, as '" + it->second + "' and '" + v + "'");
      values_[name] = v;
    };
    if (inline_value) {
      set_value(*inline_value);
    } else if (i + 1 >= argc || looks_like_option(argv[i + 1])) {
      // no value: an error if a command asks for this option (get), else an unknown option
      // (finish); either way the next option is not swallowed as its value
      values_.erase(name);
      valueless_.insert(name);
    } else {
      set_value(argv[++i]);
      valueless_.erase(name);
    }
  }
  if (flags_given_.count("quiet")) set_quiet(true);
  used_["quiet"] = true;
}

std::optional<std::string> args::get(const std::string& name) {
  used_[name] = true;
  if (valueless_.count(name)) throw usage_error("option " + option_name(name) + " needs a value");
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string args::glued_hint(const std::string& name) const {
  // "-oplan.bin", "-o=plan.bin": a value glued to -o is an argument of its own here
  const std::string spelled = option_name(name);
  if (spelled.size() != 2) return "";
  for (const std::string& p : positional_)
    if (p.size() > 2 && p.rfind(spelled, 0) == 0 && !(p[2] == '=' && p.size() == 3))
      return " ('" + p + "' was given: write " + spelled + " and its value as two arguments, " + spelled + " " +
             p.substr(p[2] == '=' ? 3 : 2) + ")";
  return "";
}

std::string args::require(const std::string& name) {
  auto v = get(name);
  if (!v) {
    std::string msg = "missing required option " + option_name(name);
    // a mistyped option is the usual cause: name the given ones that no command reads yet
    // and that are close to this one
    for (const auto& given : given_names())
      if (!used_.count(given) && near_miss(given, name))
        msg += " (" + option_name(given) + " was given, which is not an option here: a typo?)";
    msg += glued_hint(name);
    throw usage_error(msg);
  }
  return *v;
}

std::string args::get_or(const std::string& name, const std::string& def) {
  auto v = get(name);
  return v ? *v : def;
}

namespace {
//! `s` without one leading '+' (which std::from_chars does not read); empty if that leaves
//! no digits or a second sign ("+", "+-1").
std::string_view without_plus(std::string_view s) {
  if (s.empty() || s.front() != '+') return s;
  s.remove_prefix(1);
  return !s.empty() && s.front() == '-' ? std::string_view{} : s;
}
}  // namespace

bool parse_decimal(std::string_view tok, double& v) {
  // std::from_chars (general format) reads exactly this grammar, without a leading '+',
  // and never hex; it is only the syntax check: strtod gives the value, so that overflow
  // reads as +-inf and underflow as 0 or a subnormal, where from_chars reports an error.
  const std::string_view body = without_plus(tok);
  if (body.empty()) return false;
  double ignored = 0.0;
  const auto [ptr, ec] = std::from_chars(body.data(), body.data() + body.size(), ignored);
  if (ec == std::errc::invalid_argument || ptr != body.data() + body.size()) return false;
  const std::string copy(tok);  // NUL-terminated for strtod (`tok` holds no NUL: it parsed whole)
  v = std::strtod(copy.c_str(), nullptr);
  return true;
}

std::uint64_t parse_uint64(const std::string& s, const std::string& what) {
  std::string_view digits = without_plus(s);
  int base = 10;
  if (digits.size() > 2 && digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) {
    digits.remove_prefix(2);
    base = 16;
  }
  unsigned long long v = 0;
  const char* const end = digits.data() + digits.size();
  const auto [ptr, ec] = digits.empty() ? std::from_chars_result{end, std::errc::invalid_argument}
                                        : std::from_chars(digits.data(), end, v, base);
  if (ec != std::errc{} || ptr != end)
    throw usage_error(what + ": '" + s + "' is not an unsigned 64-bit integer (decimal or 0x hex)");
  return v;
}

long parse_int(const std::string& s, const std::string& what) {
  if (s.empty()) throw usage_error(what + ": empty value");
  const std::string_view body = without_plus(s);
  long v = 0;
  const char* const end = body.data() + body.size();
  const auto [ptr, ec] = body.empty() ? std::from_chars_result{end, std::errc::invalid_argument}
                                      : std::from_chars(body.data(), end, v, 10);
  if (ec == std::errc::result_out_of_range && ptr == end)
    throw usage_error(what + ": '" + s + "' is out of range for a " + std::to_string(8 * sizeof(long)) + "-bit integer");
  if (ec != std::errc{} || ptr != end) throw usage_error(what + ": '" + s + "' is not an integer");
  return v;
}

double parse_double(const std::string& s, const std::string& what) {
  if (s.empty()) throw usage_error(what + ": empty value");
  double v = 0.0;
  if (!parse_decimal(s, v)) throw usage_error(what + ": '" + s + "' is not a number");
  if (!std::isfinite(v)) throw usage_error(what + ": '" + s + "' is not finite");
  return v + 0.0;  // "-0" is 0 (a plan built from -0 would otherwise differ in its bytes)
}

long args::get_int(const std::string& name, long def, long lo, long hi) {
  auto v = get(name);
  if (!v) return def;
  const long x = parse_int(*v, option_name(name));
  if (x < lo || x > hi)
    throw usage_error(option_name(name) + " " + *v + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

long args::require_int(const std::string& name, long lo, long hi) {
  const std::string s = require(name);
  const long x = parse_int(s, option_name(name));
  if (x < lo || x > hi)
    throw usage_error(option_name(name) + " " + s + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

namespace {
//! A range bound as a user would write it: 8, 0.5, 1e+12.
std::string bound(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}
double in_range(const std::string& name, const std::string& text, double lo, double hi) {
  const double x = parse_double(text, option_name(name));
  if (x < lo || x > hi)
    throw usage_error(option_name(name) + " " + text + " is out of range [" + bound(lo) + ", " + bound(hi) + "]");
  return x;
}
}  // namespace

double args::get_double(const std::string& name, double def, double lo, double hi) {
  auto v = get(name);
  return v ? in_range(name, *v, lo, hi) : def;
}

double args::require_double(const std::string& name, double lo, double hi) { return in_range(name, require(name), lo, hi); }

bool args::flag(const std::string& name) {
  used_[name] = true;
  return flags_given_.count(name) > 0;
}

std::string trim_spaces(const std::string& s) {
  const auto first = s.find_first_not_of(' ');
  return first == std::string::npos ? std::string() : s.substr(first, s.find_last_not_of(' ') - first + 1);
}

std::vector<std::string> args::get_list(const std::string& name, const std::string& def) {
  const std::string s = get_or(name, def);
  std::vector<std::string> out(1);
  for (char c : s) {
    if (c == ',')
      out.emplace_back();
    else
      out.back() += c;
  }
  // spaces around an item go ("2, 3"); inside one they stay (a path in --kv plan:FILE; "2 3"
  // is then an error naming "2 3", not silently the width 23)
  for (std::string& item : out) item = trim_spaces(item);
  if (out.size() == 1 && out[0].empty()) throw usage_error(option_name(name) + " needs at least one item");
  for (const std::string& item : out)  // "2,,3", "2,": a typo, not silently the list without it
    if (item.empty()) throw usage_error(option_name(name) + " '" + s + "' has an empty item");
  return out;
}

std::vector<std::string> args::given_names() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : values_) out.push_back(k);
  for (const auto& [k, v] : flags_given_) out.push_back(k);
  out.insert(out.end(), valueless_.begin(), valueless_.end());
  return out;
}

void args::finish() const {
  const std::vector<std::string> given = given_names();
  for (const auto& k : given)
    if (!used_.count(k)) {
      // the command asked for every option it knows (get, require, flag): a close one that
      // was not given is the likely meaning
      std::string msg = "unknown option " + option_name(k);
      std::string best;
      std::size_t best_d = static_cast<std::size_t>(-1);
      for (const auto& [known, asked] : used_)
        if (known != "quiet" && std::find(given.begin(), given.end(), known) == given.end())
          if (const std::size_t d = typo_distance(k, known); d < best_d) {
            best = known;
            best_d = d;
          }
      if (!best.empty()) msg += " (did you mean " + option_name(best) + "?)";
      throw usage_error(msg);
    }
  if (!positional_.empty()) {
    // an optional -o (eval) that was glued to its value: say how to write it
    const std::string hint = used_.count("o") ? glued_hint("o") : "";
    throw usage_error("unexpected argument '" + positional_.front() + "'" + hint);
  }
}

}  // namespace bgtq::cli
