// json_writer (plan JSON, --json outputs, eval reports): string escaping and number
// formatting, byte for byte. Paths and names with quotes, backslashes or control
// characters must stay valid JSON; floats print with enough digits to round-trip (9 for
// float, 17 for double); non-finite numbers become null.
#include <catch2/catch.hpp>

#include <bgtq/io/json.hpp>

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

TEST_CASE("json_writer escapes strings and prints round-trip numbers", "[io][json]") {
  std::ostringstream os;
  bgtq::json_writer w(os);
  w.begin_object()
      .key("a\\b")
      .value("q\"b\\s\n\r\t\x01\x1f ok")
      .key("f")
      .value(0.1f)
      .key("d")
      .value(0.1)
      .key("n")
      .value(std::nan(""))
      .key("i")
      .value(-std::numeric_limits<double>::infinity())
      .key("x")
      .begin_array()
      .value(1)
      .value(true)
      .null()
      .end_array()
      .end_object();
  CHECK(os.str() ==
        "{\"a\\\\b\":\"q\\\"b\\\\s\\n\\r\\t\\u0001\\u001f ok\",\"f\":0.100000001,\"d\":0.10000000000000001,"
        "\"n\":null,\"i\":null,\"x\":[1,true,null]}");
}

TEST_CASE("json_writer keeps valid UTF-8 and replaces the bytes of invalid sequences with U+FFFD", "[io][json]") {
  const std::string fffd = "\xEF\xBF\xBD";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"caf\xC3\xA9 \xE2\x88\x92 \xF0\x9F\x98\x80", "caf\xC3\xA9 \xE2\x88\x92 \xF0\x9F\x98\x80"},  // 2, 3, 4 bytes
      {"caf\xE9.npy", "caf" + fffd + ".npy"},                  // a Latin-1 byte
      {"\xC0\xAF", fffd + fffd},                                // overlong '/'
      {"\xE0\x80\xAF", fffd + fffd + fffd},                      // overlong, 3 bytes
      {"\xED\xA0\x80", fffd + fffd + fffd},                      // a surrogate
      {"\xF4\x90\x80\x80", fffd + fffd + fffd + fffd},            // above U+10FFFF
      {"\xE2\x88", fffd + fffd},                                // cut short at the end
      {"\x80x\xFF", fffd + "x" + fffd},                         // stray continuation, 0xFF
      {"\xF4\x8F\xBF\xBF", "\xF4\x8F\xBF\xBF"},                   // U+10FFFF itself
  };
  for (const auto& [in, want] : cases) {
    std::ostringstream os;
    bgtq::json_writer(os).value(in);
    CHECK(os.str() == "\"" + want + "\"");
  }
}
