#include "weft/train/json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

namespace weft::train {
namespace {

// The byte offset a parse error reports, or npos when the text parses.
size_t error_offset(std::string_view text) {
  try {
    parse_json(text);
  } catch (const JsonError& e) {
    return e.offset();
  }
  return std::string::npos;
}

TEST(Json, ParsesEveryType) {
  Json v = parse_json(
      R"( {"n": null, "t": true, "f": false, "i": -42, "d": 2.5e-3, "s": "a\"b\\c\n\u00e9",
           "a": [1, [2, {}], []], "o": {"x": {"y": 1}}} )");
  EXPECT_TRUE(v.at("n").is_null());
  EXPECT_TRUE(v.at("t").as_bool());
  EXPECT_FALSE(v.at("f").as_bool());
  EXPECT_EQ(v.at("i").as_int(), -42);
  EXPECT_TRUE(v.at("i").is_integer());
  EXPECT_FALSE(v.at("d").is_integer());
  EXPECT_DOUBLE_EQ(v.at("d").as_double(), 2.5e-3);
  EXPECT_EQ(v.at("s").as_string(), "a\"b\\c\n\xc3\xa9");
  EXPECT_EQ(v.at("a").size(), 3u);
  EXPECT_EQ(v.at("a").at(1).at(0).as_int(), 2);
  EXPECT_EQ(v.at("o").at("x").at("y").as_int(), 1);
  EXPECT_EQ(v.find("missing"), nullptr);
}

TEST(Json, KeepsKeyOrderAndWritesCompactly) {
  Json v;
  v["zeta"] = 1;
  v["alpha"] = "two";
  v["list"].push_back(true);
  v["list"].push_back(nullptr);
  EXPECT_EQ(v.dump(), R"({"zeta":1,"alpha":"two","list":[true,null]})");
  EXPECT_EQ(v.dump(2),
            "{\n  \"zeta\": 1,\n  \"alpha\": \"two\",\n  \"list\": [\n    true,\n"
            "    null\n  ]\n}");
}

TEST(Json, RoundTripsThroughText) {
  const char* text =
      R"({"name":"h.0.attn\t\"qkv\"","shape":[768,2304],"lr":0.0003,"big":9007199254740993,)"
      R"("neg":-1.5e+300,"tiny":5e-324,"whole":2.0,"ctrl":"\u0001","u":"\ud83d\ude00","e":{},"ea":[]})";
  Json v = parse_json(text);
  EXPECT_EQ(v.at("big").as_int(), 9007199254740993);  // beyond 2^53: kept exact
  EXPECT_EQ(v.at("u").as_string(), "\xf0\x9f\x98\x80");
  EXPECT_FALSE(v.at("whole").is_integer());
  for (int indent : {-1, 0, 2}) {
    Json again = parse_json(v.dump(indent));
    EXPECT_EQ(again, v) << v.dump(indent);
    EXPECT_EQ(again.dump(), v.dump());
    EXPECT_FALSE(again.at("whole").is_integer());
  }
  EXPECT_EQ(v.at("ctrl").dump(), R"("\u0001")");
}

TEST(Json, IntegersBeyondInt64BecomeDoubles) {
  Json v = parse_json("[9223372036854775807, 9223372036854775808, -9223372036854775808]");
  EXPECT_EQ(v.at(0).as_int(), std::numeric_limits<int64_t>::max());
  EXPECT_FALSE(v.at(1).is_integer());
  EXPECT_DOUBLE_EQ(v.at(1).as_double(), 9223372036854775808.0);
  EXPECT_EQ(v.at(2).as_int(), std::numeric_limits<int64_t>::min());
}

TEST(Json, ErrorsGiveTheByteOffset) {
  EXPECT_EQ(error_offset(R"({"a" 1})"), 5u);        // missing ':'
  EXPECT_EQ(error_offset(R"({"a":1,})"), 7u);       // trailing comma
  EXPECT_EQ(error_offset(R"([1, 2,])"), 6u);        // trailing comma in an array
  EXPECT_EQ(error_offset(R"({"a":1}x)"), 7u);       // text after the value
  EXPECT_EQ(error_offset(R"({"a":01})"), 5u);       // leading zero
  EXPECT_EQ(error_offset(R"({"a":1,"a":2})"), 7u);  // duplicate key
  EXPECT_EQ(error_offset(R"(["a\q"])"), 4u);        // bad escape
  EXPECT_EQ(error_offset("[\"a\nb\"]"), 3u);        // raw control character
  EXPECT_EQ(error_offset("[\"\xff\"]"), 2u);        // invalid UTF-8
  EXPECT_EQ(error_offset("[\"\xc0\xaf\"]"), 2u);    // overlong UTF-8
  EXPECT_EQ(error_offset(R"(["\udc00"])"), 2u);     // lone low surrogate
  EXPECT_EQ(error_offset(R"([1.])"), 3u);
  EXPECT_EQ(error_offset(R"([-])"), 2u);
  EXPECT_EQ(error_offset("[NaN]"), 1u);
  EXPECT_EQ(error_offset("[tru]"), 1u);
  EXPECT_EQ(error_offset("// c\n1"), 0u);  // no comments
  EXPECT_EQ(error_offset(""), 0u);
  EXPECT_EQ(error_offset(R"({"a":)"), 5u);  // ends early
  EXPECT_EQ(error_offset(R"(["abc)"), 5u);
  EXPECT_EQ(error_offset("[1e999]"), 1u);                // out of range
  EXPECT_EQ(error_offset(std::string(200, '[')), 128u);  // nesting limit
}

TEST(Json, ErrorMessageNamesSourceOffsetAndProblem) {
  try {
    parse_json(R"({"a" 1})", "config.json");
    FAIL() << "no error";
  } catch (const JsonError& e) {
    EXPECT_STREQ(e.what(), "config.json: invalid JSON at byte 5: expected ':' after an object key");
  }
}

TEST(Json, TypeErrorsNameBothTypes) {
  Json v = parse_json(R"({"x": "str", "y": 1.5})");
  try {
    v.at("x").as_int();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "expected a JSON integer, got string");
  }
  EXPECT_THROW(v.at("y").as_int(), Error);
  EXPECT_THROW(v.at("nope"), Error);
  EXPECT_THROW(v.at("x").at(0), Error);
}

TEST(Json, RefusesToWriteNonFiniteNumbers) {
  EXPECT_THROW(Json(std::nan("")).dump(), Error);
  EXPECT_THROW(Json(std::numeric_limits<double>::infinity()).dump(), Error);
}

TEST(Json, RefusesToWriteInvalidUtf8) {
  EXPECT_EQ(Json("caf\xc3\xa9").dump(), "\"caf\xc3\xa9\"");
  try {
    Json("ab\xff").dump();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "cannot write a string with invalid UTF-8 at byte 2 as JSON");
  }
  EXPECT_THROW(Json("\xe2\x82").dump(), Error);  // truncated sequence
}

}  // namespace
}  // namespace weft::train
