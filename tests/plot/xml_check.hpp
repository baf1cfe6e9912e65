#pragma once
// A small XML well-formedness checker for the tests of the SVG writer: one root element,
// properly nested and matching tags, quoted attributes without '<' and without
// duplicates, only the predefined entities and numeric character references, comments
// without "--", no stray '<' or '&' in text. Returns "" when well formed, else the
// problem and its byte offset. It also collects every element name it saw.
#include <cctype>
#include <set>
#include <string>
#include <vector>

namespace bgtq_test {

struct xml_report {
  std::string error;               // "" if well formed
  std::vector<std::string> names;  // element names in document order
};

class xml_checker {
 public:
  explicit xml_checker(const std::string& s) : s_(s) {}

  xml_report run() {
    xml_report r;
    try {
      if (s_.compare(0, 5, "<?xml") == 0) {
        const auto e = s_.find("?>");
        if (e == std::string::npos) throw err("unterminated XML declaration");
        i_ = e + 2;
      }
      misc();
      if (i_ >= s_.size() || s_[i_] != '<') throw err("no root element");
      element(r.names, 0);
      misc();
      if (i_ != s_.size()) throw err("content after the root element");
    } catch (const std::string& e) {
      r.error = e;
    }
    return r;
  }

 private:
  std::string err(const std::string& what) const { return what + " at offset " + std::to_string(i_); }
  static bool name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':'; }
  static bool name_char(char c) { return name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.'; }
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\t' || s_[i_] == '\r')) ++i_;
  }
  void misc() {
    for (;;) {
      ws();
      if (s_.compare(i_, 4, "<!--") == 0) {
        comment();
        continue;
      }
      return;
    }
  }
  void comment() {
    const auto e = s_.find("-->", i_ + 4);
    if (e == std::string::npos) throw err("unterminated comment");
    if (s_.substr(i_ + 4, e - i_ - 4).find("--") != std::string::npos) throw err("'--' inside a comment");
    if (e > i_ + 4 && s_[e - 1] == '-') throw err("comment ends with '-'");
    i_ = e + 3;
  }
  std::string name() {
    if (i_ >= s_.size() || !name_start(s_[i_])) throw err("bad name");
    const std::size_t b = i_;
    while (i_ < s_.size() && name_char(s_[i_])) ++i_;
    return s_.substr(b, i_ - b);
  }
  void reference() {  // at '&'
    const auto e = s_.find(';', i_);
    if (e == std::string::npos || e - i_ > 10) throw err("unterminated entity reference");
    const std::string ent = s_.substr(i_ + 1, e - i_ - 1);
    static const std::set<std::string> ok = {"amp", "lt", "gt", "quot", "apos"};
    bool good = ok.count(ent) > 0;
    if (!good && ent.size() > 1 && ent[0] == '#') {
      good = true;
      const bool hex = ent[1] == 'x';
      for (std::size_t j = hex ? 2 : 1; j < ent.size(); ++j)
        good = good && (std::isdigit(static_cast<unsigned char>(ent[j])) ||
                        (hex && std::isxdigit(static_cast<unsigned char>(ent[j]))));
    }
    if (!good) throw err("unknown entity '&" + ent + ";'");
    i_ = e + 1;
  }
  void element(std::vector<std::string>& names, int depth) {
    if (depth > 100) throw err("nesting too deep");
    ++i_;  // '<'
    const std::string n = name();
    names.push_back(n);
    std::set<std::string> attrs;
    for (;;) {
      const std::size_t before = i_;
      ws();
      if (i_ >= s_.size()) throw err("unterminated start tag <" + n);
      if (s_.compare(i_, 2, "/>") == 0) {
        i_ += 2;
        return;
      }
      if (s_[i_] == '>') {
        ++i_;
        break;
      }
      if (i_ == before) throw err("attributes must be separated by white space in <" + n);
      const std::string a = name();
      if (!attrs.insert(a).second) throw err("duplicate attribute '" + a + "' in <" + n);
      ws();
      if (i_ >= s_.size() || s_[i_] != '=') throw err("attribute '" + a + "' without '='");
      ++i_;
      ws();
      if (i_ >= s_.size() || (s_[i_] != '"' && s_[i_] != '\'')) throw err("unquoted attribute '" + a + "'");
      const char q = s_[i_++];
      while (i_ < s_.size() && s_[i_] != q) {
        if (s_[i_] == '<') throw err("'<' inside attribute '" + a + "'");
        if (s_[i_] == '&') {
          reference();
          continue;
        }
        ++i_;
      }
      if (i_ >= s_.size()) throw err("unterminated attribute '" + a + "'");
      ++i_;
    }
    // content
    for (;;) {
      if (i_ >= s_.size()) throw err("unterminated element <" + n + ">");
      const char c = s_[i_];
      if (c == '<') {
        if (s_.compare(i_, 2, "</") == 0) {
          i_ += 2;
          const std::string e = name();
          if (e != n) throw err("</" + e + "> closes <" + n + ">");
          ws();
          if (i_ >= s_.size() || s_[i_] != '>') throw err("bad end tag </" + e);
          ++i_;
          return;
        }
        if (s_.compare(i_, 4, "<!--") == 0) {
          comment();
          continue;
        }
        element(names, depth + 1);
        continue;
      }
      if (c == '&') {
        reference();
        continue;
      }
      if (c == '>' && i_ >= 2 && s_.compare(i_ - 2, 2, "]]") == 0) throw err("']]>' in text");
      ++i_;
    }
  }

  const std::string& s_;
  std::size_t i_ = 0;
};

inline xml_report check_xml(const std::string& s) { return xml_checker(s).run(); }

}  // namespace bgtq_test
