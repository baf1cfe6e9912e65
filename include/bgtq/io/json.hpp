#pragma once
//! @file io/json.hpp
//! A small streaming JSON writer (no DOM, no dependency). Doubles are printed with 17
//! significant digits (round-trip exact), floats with 9; non-finite numbers become null.
//! Commas and nesting are tracked for you:
//! @code
//! bgtq::json_writer w(std::cout);
//! w.begin_object().key("bits").value(3).key("mse").value(0.03).end_object();
//! @endcode

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "../core/utf8.hpp"

namespace bgtq {

//! Streaming JSON writer over a std::ostream.
class json_writer {
 public:
  explicit json_writer(std::ostream& os) : os_(os) {}

  json_writer& begin_object() { return open('{'); }
  json_writer& end_object() { return close('}'); }
  json_writer& begin_array() { return open('['); }
  json_writer& end_array() { return close(']'); }

  //! Object key; the next call writes its value.
  json_writer& key(std::string_view k) {
    comma();
    write_string(k);
    os_ << ':';
    after_key_ = true;
    return *this;
  }
  json_writer& value(std::string_view s) {
    comma();
    write_string(s);
    return *this;
  }
  json_writer& value(const char* s) { return value(std::string_view(s)); }
  json_writer& value(const std::string& s) { return value(std::string_view(s)); }
  json_writer& value(bool b) {
    comma();
    os_ << (b ? "true" : "false");
    return *this;
  }
  json_writer& value(double d) {
    comma();
    write_number(d, 17);
    return *this;
  }
  json_writer& value(float f) {
    comma();
    write_number(f, 9);
    return *this;
  }
  template <class I>
    requires(std::is_integral_v<I> && !std::is_same_v<I, bool>)
  json_writer& value(I i) {
    comma();
    os_ << +i;
    return *this;
  }
  json_writer& null() {
    comma();
    os_ << "null";
    return *this;
  }
  //! An array of numbers in one call.
  template <class T>
  json_writer& array(const std::vector<T>& xs) {
    begin_array();
    for (const T& x : xs) value(x);
    return end_array();
  }
  template <class T>
  json_writer& array(const T* xs, std::size_t n) {
    begin_array();
    for (std::size_t i = 0; i < n; ++i) value(xs[i]);
    return end_array();
  }

 private:
  json_writer& open(char c) {
    comma();
    os_ << c;
    first_.push_back(true);
    return *this;
  }
  json_writer& close(char c) {
    os_ << c;
    if (!first_.empty()) first_.pop_back();
    return *this;
  }
  void comma() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (!first_.empty()) {
      if (!first_.back()) os_ << ',';
      first_.back() = false;
    }
  }
  void write_number(double d, int digits) {
    if (!std::isfinite(d)) {
      os_ << "null";
      return;
    }
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.*g", digits, d);
    os_ << buf;
  }
  //! Escaped as JSON requires; a byte that starts no valid UTF-8 sequence (a Latin-1 file
  //! name, say) becomes U+FFFD, so the document stays valid UTF-8.
  void write_string(std::string_view s) {
    os_ << '"';
    for (char ch : detail::utf8_sanitized(s)) {
      const unsigned char c = static_cast<unsigned char>(ch);
      switch (c) {
        case '"': os_ << "\\\""; break;
        case '\\': os_ << "\\\\"; break;
        case '\n': os_ << "\\n"; break;
        case '\r': os_ << "\\r"; break;
        case '\t': os_ << "\\t"; break;
        default:
          if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            os_ << buf;
          } else {
            os_ << ch;
          }
      }
    }
    os_ << '"';
  }

  std::ostream& os_;
  std::vector<bool> first_;
  bool after_key_ = false;
};

}  // namespace bgtq
