#pragma once
//! @file plot/json_read.hpp
//! A small strict JSON reader (RFC 8259) for the files the plots read, such as the
//! results `bgtq eval -o R.json` writes. It builds a tree of json_value; numbers are
//! doubles, object members keep their order, duplicate keys keep the last value.
//! Errors name the file, the line and column and what was expected.

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "../core/error.hpp"

namespace bgtq::plot {

//! One JSON value.
class json_value {
 public:
  enum class kind : unsigned char { null, boolean, number, string, array, object };

  json_value() = default;
  static json_value make_bool(bool b) { json_value v; v.k_ = kind::boolean; v.b_ = b; return v; }
  static json_value make_number(double d) { json_value v; v.k_ = kind::number; v.n_ = d; return v; }
  static json_value make_string(std::string s) { json_value v; v.k_ = kind::string; v.s_ = std::move(s); return v; }
  static json_value make_array() { json_value v; v.k_ = kind::array; return v; }
  static json_value make_object() { json_value v; v.k_ = kind::object; return v; }

  kind type() const noexcept { return k_; }
  bool is_null() const noexcept { return k_ == kind::null; }
  bool is_number() const noexcept { return k_ == kind::number; }
  bool is_string() const noexcept { return k_ == kind::string; }
  bool is_array() const noexcept { return k_ == kind::array; }
  bool is_object() const noexcept { return k_ == kind::object; }
  bool as_bool() const noexcept { return b_; }
  double as_number() const noexcept { return n_; }
  const std::string& as_string() const noexcept { return s_; }

  //! Elements of an array (empty for other kinds).
  const std::vector<json_value>& items() const noexcept { return items_; }
  //! Members of an object in file order (empty for other kinds).
  const std::vector<std::pair<std::string, json_value>>& members() const noexcept { return members_; }
  //! Member `key` of an object, or nullptr (the last one if the key repeats).
  const json_value* find(std::string_view key) const noexcept {
    const json_value* r = nullptr;
    for (const auto& m : members_)
      if (m.first == key) r = &m.second;
    return r;
  }

  std::vector<json_value>& items_mut() noexcept { return items_; }
  std::vector<std::pair<std::string, json_value>>& members_mut() noexcept { return members_; }

 private:
  kind k_ = kind::null;
  bool b_ = false;
  double n_ = 0;
  std::string s_;
  std::vector<json_value> items_;
  std::vector<std::pair<std::string, json_value>> members_;
};

namespace detail {

class json_parser {
 public:
  json_parser(std::string_view text, std::string name) : t_(text), name_(std::move(name)) {}

  json_value parse_document() {
    skip_ws();
    json_value v = parse_value(0);
    skip_ws();
    if (i_ != t_.size()) error("unexpected text after the JSON value");
    return v;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    std::size_t line = 1, col = 1;
    for (std::size_t j = 0; j < i_ && j < t_.size(); ++j) {
      if (t_[j] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    fail(errc::format_error, name_ + ": invalid JSON at line " + std::to_string(line) + ", column " + std::to_string(col) +
                                 ": " + what);
  }
  //! A character for an error message, printable whatever the byte is.
  static std::string describe(char c) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x21 && u < 0x7f) return std::string("character '") + c + "'";
    char b[16];
    std::snprintf(b, sizeof b, "byte 0x%02x", u);
    return b;
  }
  void skip_ws() {
    while (i_ < t_.size() && (t_[i_] == ' ' || t_[i_] == '\t' || t_[i_] == '\n' || t_[i_] == '\r')) ++i_;
  }
  bool eat(char c) {
    if (i_ < t_.size() && t_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect_word(std::string_view w) {
    if (t_.substr(i_, w.size()) != w) error("expected '" + std::string(w) + "'");
    i_ += w.size();
  }
  json_value parse_value(int depth) {
    if (depth > 200) error("nesting deeper than 200 levels");
    if (i_ >= t_.size()) error("unexpected end of file");
    const char c = t_[i_];
    if (c == '{') return parse_object(depth);
    if (c == '[') return parse_array(depth);
    if (c == '"') return json_value::make_string(parse_string());
    if (c == 't') { expect_word("true"); return json_value::make_bool(true); }
    if (c == 'f') { expect_word("false"); return json_value::make_bool(false); }
    if (c == 'n') { expect_word("null"); return json_value{}; }
    if (c == '-' || (c >= '0' && c <= '9')) return json_value::make_number(parse_number());
    error("unexpected " + describe(c));
  }
  json_value parse_object(int depth) {
    json_value v = json_value::make_object();
    ++i_;
    skip_ws();
    if (eat('}')) return v;
    for (;;) {
      skip_ws();
      if (i_ >= t_.size() || t_[i_] != '"') error("expected a string key");
      std::string key = parse_string();
      skip_ws();
      if (!eat(':')) error("expected ':' after a key");
      skip_ws();
      json_value m = parse_value(depth + 1);
      v.members_mut().emplace_back(std::move(key), std::move(m));
      skip_ws();
      if (eat(',')) continue;
      if (eat('}')) return v;
      error("expected ',' or '}' in an object");
    }
  }
  json_value parse_array(int depth) {
    json_value v = json_value::make_array();
    ++i_;
    skip_ws();
    if (eat(']')) return v;
    for (;;) {
      skip_ws();
      v.items_mut().push_back(parse_value(depth + 1));
      skip_ws();
      if (eat(',')) continue;
      if (eat(']')) return v;
      error("expected ',' or ']' in an array");
    }
  }
  unsigned hex4() {
    if (i_ + 4 > t_.size()) error("truncated \\u escape");
    unsigned u = 0;
    for (int j = 0; j < 4; ++j) {
      const char h = t_[i_++];
      u <<= 4;
      if (h >= '0' && h <= '9') u |= static_cast<unsigned>(h - '0');
      else if (h >= 'a' && h <= 'f') u |= static_cast<unsigned>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') u |= static_cast<unsigned>(h - 'A' + 10);
      else error("bad hex digit in a \\u escape");
    }
    return u;
  }
  static void put_utf8(std::string& s, unsigned cp) {
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      s += static_cast<char>(0xE0 | (cp >> 12));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      s += static_cast<char>(0xF0 | (cp >> 18));
      s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  std::string parse_string() {
    ++i_;  // opening quote
    std::string s;
    for (;;) {
      if (i_ >= t_.size()) error("unterminated string");
      const char c = t_[i_++];
      if (c == '"') return s;
      if (static_cast<unsigned char>(c) < 0x20) error("control character inside a string");
      if (c != '\\') {
        s += c;
        continue;
      }
      if (i_ >= t_.size()) error("unterminated escape");
      const char e = t_[i_++];
      switch (e) {
        case '"': s += '"'; break;
        case '\\': s += '\\'; break;
        case '/': s += '/'; break;
        case 'b': s += '\b'; break;
        case 'f': s += '\f'; break;
        case 'n': s += '\n'; break;
        case 'r': s += '\r'; break;
        case 't': s += '\t'; break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (!(eat('\\') && eat('u'))) error("unpaired surrogate in a \\u escape");
            const unsigned lo = hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) error("bad low surrogate in a \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            error("unpaired surrogate in a \\u escape");
          }
          put_utf8(s, cp);
          break;
        }
        default: error("bad escape: backslash followed by " + describe(e));
      }
    }
  }
  double parse_number() {
    const std::size_t start = i_;
    eat('-');
    if (eat('0')) {
    } else if (i_ < t_.size() && t_[i_] >= '1' && t_[i_] <= '9') {
      while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9') ++i_;
    } else {
      error("bad number");
    }
    if (eat('.')) {
      if (!(i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9')) error("bad number: digit expected after '.'");
      while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9') ++i_;
    }
    if (i_ < t_.size() && (t_[i_] == 'e' || t_[i_] == 'E')) {
      ++i_;
      if (!eat('+')) eat('-');
      if (!(i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9')) error("bad number: digit expected in the exponent");
      while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9') ++i_;
    }
    const std::string tok(t_.substr(start, i_ - start));
    return std::strtod(tok.c_str(), nullptr);  // JSON number syntax checked above; overflow gives +-inf
  }

  std::string_view t_;
  std::string name_;
  std::size_t i_ = 0;
};

}  // namespace detail

//! Parses a JSON document; `name` (a file name) prefixes error messages.
//! @throws bgtq::error(format_error) naming line, column and the problem
inline json_value parse_json(std::string_view text, const std::string& name = "JSON") {
  return detail::json_parser(text, name).parse_document();
}

//! Reads and parses a JSON file.
//! @throws bgtq::error(io_error) if it cannot be read, format_error if it is not JSON
inline json_value read_json_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail(errc::io_error, "cannot read '" + path + "': it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(errc::io_error, "cannot open '" + path + "': " + std::generic_category().message(errno));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail(errc::io_error, "read from '" + path + "' failed");
  return parse_json(text, path);
}

}  // namespace bgtq::plot
