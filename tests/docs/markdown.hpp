#pragma once
// What the docs tests need from Markdown and from the example sources: fenced code
// blocks with the annotation comment above them, snippets between
// `// example-begin NAME` / `// example-end NAME` markers, and local links.
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace bgtq_docs {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

inline std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == '\n') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

inline std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

//! A fenced block: ```lang ... ```, with the HTML comment on the nearest non-empty line
//! above it ("" if that line is not a comment).
struct code_block {
  std::string lang;
  std::string text;        // the lines between the fences, each ending in '\n'
  std::string annotation;  // e.g. "snippet: examples/quickstart/quickstart.cpp#quickstart"
  int line = 0;            // 1-based line of the opening fence
};

//! All fenced blocks of a Markdown document (fences at column 0). Throws on an
//! unterminated fence.
inline std::vector<code_block> code_blocks(const std::string& md) {
  const auto lines = split_lines(md);
  std::vector<code_block> out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind("```", 0) != 0) continue;
    code_block b;
    b.lang = trim(lines[i].substr(3));
    b.line = static_cast<int>(i) + 1;
    for (std::size_t j = i; j-- > 0;) {
      const std::string t = trim(lines[j]);
      if (t.empty()) continue;
      if (t.rfind("<!--", 0) == 0 && t.size() >= 7 && t.compare(t.size() - 3, 3, "-->") == 0)
        b.annotation = trim(t.substr(4, t.size() - 7));
      break;
    }
    std::size_t j = i + 1;
    for (; j < lines.size() && trim(lines[j]) != "```"; ++j) b.text += lines[j] + "\n";
    if (j >= lines.size()) throw std::runtime_error("unterminated code fence at line " + std::to_string(b.line));
    out.push_back(b);
    i = j;
  }
  return out;
}

//! The snippet NAME of a source file: the lines between every
//! `// example-begin NAME` and the next `// example-end NAME` (segments concatenated),
//! each with the first begin marker's indentation removed. Throws if the markers are
//! missing or unbalanced, or if a non-blank line is indented less than the marker.
inline std::string snippet(const std::string& source, const std::string& name, const std::string& file = "source") {
  const auto lines = split_lines(source);
  const std::string begin = "// example-begin " + name, end = "// example-end " + name;
  std::string out;
  std::size_t indent = std::string::npos;
  bool inside = false, found = false;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string t = trim(lines[i]);
    if (t == begin) {
      if (inside) throw std::runtime_error(file + ":" + std::to_string(i + 1) + ": nested " + begin);
      inside = found = true;
      if (indent == std::string::npos) indent = lines[i].find('/');
      continue;
    }
    if (t == end) {
      if (!inside) throw std::runtime_error(file + ":" + std::to_string(i + 1) + ": " + end + " without a begin");
      inside = false;
      continue;
    }
    if (!inside) continue;
    if (t.empty()) {
      out += "\n";
      continue;
    }
    if (lines[i].size() < indent || lines[i].find_first_not_of(' ') < indent)
      throw std::runtime_error(file + ":" + std::to_string(i + 1) + ": snippet line indented less than its marker");
    out += lines[i].substr(indent) + "\n";
  }
  if (inside) throw std::runtime_error(file + ": " + begin + " is never closed");
  if (!found) throw std::runtime_error(file + ": no snippet named '" + name + "'");
  return out;
}

//! Names of every `// example-begin NAME` marker in a source file.
inline std::vector<std::string> snippet_names(const std::string& source) {
  std::vector<std::string> names;
  for (const auto& l : split_lines(source)) {
    const std::string t = trim(l);
    const std::string key = "// example-begin ";
    if (t.rfind(key, 0) == 0) names.push_back(trim(t.substr(key.size())));
  }
  return names;
}

//! Targets of Markdown links and images `[text](target)` outside code blocks.
inline std::vector<std::string> link_targets(const std::string& md) {
  std::vector<std::string> out;
  bool fenced = false;
  for (const auto& line : split_lines(md)) {
    if (line.rfind("```", 0) == 0) {
      fenced = !fenced;
      continue;
    }
    if (fenced) continue;
    for (std::size_t p = line.find("]("); p != std::string::npos; p = line.find("](", p + 2)) {
      const auto e = line.find(')', p + 2);
      if (e == std::string::npos) break;
      out.push_back(line.substr(p + 2, e - p - 2));
    }
  }
  return out;
}

//! Inline code spans `...` of one line.
inline std::vector<std::string> inline_code(const std::string& line) {
  std::vector<std::string> out;
  for (std::size_t p = line.find('`'); p != std::string::npos;) {
    const auto e = line.find('`', p + 1);
    if (e == std::string::npos) break;
    out.push_back(line.substr(p + 1, e - p - 1));
    p = line.find('`', e + 1);
  }
  return out;
}

}  // namespace bgtq_docs
