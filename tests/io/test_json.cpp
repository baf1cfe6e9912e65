// json_writer (plan JSON, --json outputs, eval reports): string escaping and number
// formatting, byte for byte. Paths and names with quotes, backslashes or control
// characters must stay valid JSON; floats print with enough digits to round-trip (9 for
// float, 17 for double); non-finite numbers become null.
#include <catch2/catch.hpp>

#include <bgtq/io/json.hpp>

#include <cmath>
#include <limits>
#include <sstream>

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
