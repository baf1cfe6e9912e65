#pragma once
// Shared plumbing of the bgtq command-line tool: option parsing, the command registry
// and the exit-code contract (0 success, 1 runtime/data error, 2 bad usage).
// Each subcommand lives in its own cmd_<name>.cpp, inside `namespace { namespace cmd_<name> {`,
// and registers itself with `bgtq::cli::registrar reg{{"name", "summary", "usage", &run}};`.
// The namespace of its own matters: the CLI compiles as one translation unit
// (BGTQ_UNITY_BUILD, CMakeLists.txt), where every file's `run`, `reg` and helpers meet.

#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace bgtq::cli {

//! Bad command-line usage: reported on stderr, exit code 2.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

//! Parsed `--name value` / `--flag` / `-o value` options of one subcommand.
class args {
 public:
  //! Parses argv[first..argc). `flags` lists the options that take no value.
  args(int argc, char** argv, int first, std::vector<std::string> flags = {});

  //! Value of --name, if given (an option given twice must have the same value both times:
  //! the constructor throws usage_error otherwise).
  std::optional<std::string> get(const std::string& name);
  //! Value of --name; usage_error if absent.
  std::string require(const std::string& name);
  //! Value of --name or `def`.
  std::string get_or(const std::string& name, const std::string& def);
  //! Integer option in [lo, hi]; usage_error naming the option if malformed.
  long get_int(const std::string& name, long def, long lo, long hi);
  long require_int(const std::string& name, long lo, long hi);
  //! Finite double option in [lo, hi].
  double get_double(const std::string& name, double def, double lo, double hi);
  double require_double(const std::string& name, double lo, double hi);
  //! True if --name (a flag) was given.
  bool flag(const std::string& name);
  //! Comma-separated list, e.g. --bits 2,3,4 (spaces around an item are trimmed, inside it
  //! they are kept; an empty item is a usage error).
  std::vector<std::string> get_list(const std::string& name, const std::string& def);
  //! Positional arguments (those not starting with --).
  const std::vector<std::string>& positional() const { return positional_; }
  //! Forgets the positional arguments (after a subcommand consumed them).
  void drop_positional() { positional_.clear(); }
  //! usage_error if any option was given that no get/require/flag asked about.
  void finish() const;

 private:
  std::vector<std::string> given_names() const;
  //! " ('-oX' was given: write -o and its value as two arguments, -o X)" when a positional
  //! argument is the one-letter option `name` glued to a value, else "".
  std::string glued_hint(const std::string& name) const;

  std::map<std::string, std::string> values_;
  std::set<std::string> valueless_;  //!< non-flag options given without a value
  std::map<std::string, bool> flags_given_;
  std::vector<std::string> flag_names_;
  std::vector<std::string> positional_;
  mutable std::map<std::string, bool> used_;
};

//! How an option is spelled on the command line: "-o" or "--name".
std::string option_name(const std::string& name);

//! Whether args reads the argument after `arg` as arg's value: `arg` is an option ("-o",
//! "--name") that is not one of the command's `flags` (nor --quiet) and has no "=value".
bool takes_next_as_value(const std::string& arg, const std::vector<std::string>& flags);

//! An unsigned 64-bit integer, decimal or 0x-prefixed hex (an optional leading '+';
//! "010" is ten), or usage_error naming `what`.
std::uint64_t parse_uint64(const std::string& s, const std::string& what);

//! True if `tok` is a decimal number and nothing else: an optional sign, digits with an
//! optional '.', an optional exponent ("-1", "+0.5", "2.", ".5", "3e-2"), or inf/nan in
//! any case; then `v` holds its value (overflow gives +-inf, underflow 0 or a subnormal).
//! Hex floats ("0x1p3"), blanks, a NUL byte or anything after the number make it false.
bool parse_decimal(std::string_view tok, double& v);

//! Parses an integer / double strictly (the whole string is one decimal number, finite),
//! or usage_error naming `what`.
long parse_int(const std::string& s, const std::string& what);
//! `s` without the spaces at its ends (those inside stay): an item of a list option, and
//! generate's one --kv cache.
std::string trim_spaces(const std::string& s);
double parse_double(const std::string& s, const std::string& what);

//! One subcommand.
struct command {
  const char* name;
  const char* summary;
  const char* usage;
  int (*run)(args&);
  std::vector<std::string> flags = {};  //!< options that take no value (e.g. "json")
};

//! Registers a command at static-initialisation time.
struct registrar {
  explicit registrar(command c);
};

//! All registered commands, sorted by name.
std::vector<command>& registry();

//! Warning lines on stderr, each as "bgtq CMD: warning: PREFIXLINE" (docs/errors.md);
//! shown with --quiet too.
void warn(const std::string& cmd, const std::string& text, const std::string& prefix = "");

//! An option and its value, e.g. {"-o", "plan.bin"} or {"--k", "k.npy"}.
struct named_path {
  std::string option, path;
};
//! The output checks every command runs before its work (docs/errors.md, section 1):
//! usage_error for an empty output path, two outputs naming one file, or an output
//! naming one of the inputs (it would be replaced by the result); then
//! bgtq::check_output_path on each output (io_error: a missing directory, a directory
//! in the way, no permission).
void check_outputs(const std::vector<named_path>& outputs, const std::vector<named_path>& inputs);

//! check_outputs for the files `names` (e.g. q.npy, k.npy, v.npy) that a command writes
//! into the directory `dir` of option `option`, before its work: if `dir` exists, two of
//! them naming one file (a symlink) or an input is a usage_error, and each must be
//! writable (bgtq::check_output_path: a directory in the way, a link into a missing
//! directory); if it does not exist yet, bgtq::check_output_dir and its nearest existing
//! ancestor must accept a new directory (io_error otherwise).
void check_output_dir_files(const std::string& dir, const std::string& option, const std::vector<std::string>& names,
                            const std::vector<named_path>& inputs);

//! Progress line on stderr ("[eval] layer 3/32 ...") unless --quiet was given.
void progress(const std::string& line);
void set_quiet(bool q);

}  // namespace bgtq::cli
