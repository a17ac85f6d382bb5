#include "weft/io/json.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

namespace weft::io {
namespace {

// The message of the error parsing `text` throws, or "" when it parses.
std::string error_text(std::string_view text) {
  try {
    io::parse_json(text, "t.json");
  } catch (const io::JsonError& e) {
    return e.what();
  }
  return "";
}

// The byte offset a parse error reports, or npos when the text parses.
size_t error_offset(std::string_view text) {
  try {
    io::parse_json(text);
  } catch (const io::JsonError& e) {
    return e.offset();
  }
  return std::string::npos;
}

TEST(Json, ParsesEveryType) {
  io::Json v = io::parse_json(
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
  io::Json v;
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
  io::Json v = io::parse_json(text);
  EXPECT_EQ(v.at("big").as_int(), 9007199254740993);  // beyond 2^53: kept exact
  EXPECT_EQ(v.at("u").as_string(), "\xf0\x9f\x98\x80");
  EXPECT_FALSE(v.at("whole").is_integer());
  for (int indent : {-1, 0, 2}) {
    io::Json again = io::parse_json(v.dump(indent));
    EXPECT_EQ(again, v) << v.dump(indent);
    EXPECT_EQ(again.dump(), v.dump());
    EXPECT_FALSE(again.at("whole").is_integer());
  }
  EXPECT_EQ(v.at("ctrl").dump(), R"("\u0001")");
}

TEST(Json, IntegersBeyondInt64BecomeDoubles) {
  io::Json v = io::parse_json("[9223372036854775807, 9223372036854775808, -9223372036854775808]");
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
    io::parse_json(R"({"a" 1})", "config.json");
    FAIL() << "no error";
  } catch (const io::JsonError& e) {
    EXPECT_STREQ(e.what(), "config.json: invalid JSON at byte 5: expected ':' after an object key");
  }
}

TEST(Json, TypeErrorsNameBothTypes) {
  io::Json v = io::parse_json(R"({"x": "str", "y": 1.5})");
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
  EXPECT_THROW(io::Json(std::nan("")).dump(), Error);
  EXPECT_THROW(io::Json(std::numeric_limits<double>::infinity()).dump(), Error);
}

TEST(Json, RefusesToWriteInvalidUtf8) {
  EXPECT_EQ(io::Json("caf\xc3\xa9").dump(), "\"caf\xc3\xa9\"");
  try {
    io::Json("ab\xff").dump();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "cannot write a string with invalid UTF-8 at byte 2 as JSON");
  }
  try {
    io::Json("\xe2\x82").dump();  // truncated sequence
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "cannot write a string that ends inside a UTF-8 character as JSON");
  }
}

// What the safetensors format and weft's files rely on, each with its exact
// message: nlohmann-json alone accepts several of these texts.
TEST(Json, StrictWhereNlohmannIsLenient) {
  EXPECT_EQ(error_text(R"({"a":{},"b":1,"a":{}})"),
            "t.json: invalid JSON at byte 14: duplicate key \"a\"");
  EXPECT_EQ(error_text(R"({"k\"\\":1,"k\"\\":2})"),
            "t.json: invalid JSON at byte 11: duplicate key \"k\"\\\"");
  std::string many = "{";
  for (int i = 0; i < 100; ++i) many += "\"k" + std::to_string(i) + "\":" + std::to_string(i) + ",";
  EXPECT_EQ(error_text(many + "\"k7\":0}"),
            format("t.json: invalid JSON at byte {}: duplicate key \"k7\"", many.size()));
  EXPECT_EQ(io::parse_json(many + "\"k100\":0}").size(), 101u);

  const std::string deep =
      std::string(io::Json::kMaxDepth, '[') + std::string(io::Json::kMaxDepth, ']');
  EXPECT_EQ(io::parse_json(deep).dump(), deep);
  EXPECT_EQ(error_text("{\"a\":" + std::string(io::Json::kMaxDepth, '[')),
            "t.json: invalid JSON at byte 132: nesting deeper than 128 levels");

  EXPECT_EQ(error_text("[NaN]"),
            "t.json: invalid JSON at byte 1: unexpected character 'N' where a value was expected");
  EXPECT_EQ(error_text(R"({"x": Infinity})"),
            "t.json: invalid JSON at byte 6: unexpected character 'I' where a value was expected");
  EXPECT_EQ(error_text("[-Infinity]"), "t.json: invalid JSON at byte 2: expected a digit");
  EXPECT_EQ(error_text("[1e400]"), "t.json: invalid JSON at byte 1: number out of range");
  EXPECT_EQ(error_text("[-1e-400]"), "t.json: invalid JSON at byte 1: number out of range");
  EXPECT_EQ(io::parse_json("[0e-400]").at(0).as_double(), 0.0);

  EXPECT_EQ(error_text("{} {}"),
            "t.json: invalid JSON at byte 3: unexpected text after the JSON value");
  EXPECT_EQ(error_text("[1] x"),
            "t.json: invalid JSON at byte 4: unexpected text after the JSON value");
  EXPECT_EQ(error_text(std::string("{}\0{}", 5)),
            "t.json: invalid JSON at byte 2: unexpected text after the JSON value");
  EXPECT_EQ(error_text(std::string("[1,\0]", 5)),
            "t.json: invalid JSON at byte 3: unexpected byte 0x00 where a value was expected");
  EXPECT_EQ(error_text("\xef\xbb\xbf{}"),  // a byte order mark
            "t.json: invalid JSON at byte 0: unexpected byte 0xef where a value was expected");

  EXPECT_EQ(error_text("[-01]"),
            "t.json: invalid JSON at byte 2: leading zeros are not allowed in numbers");
  EXPECT_EQ(error_text("[00]"),
            "t.json: invalid JSON at byte 1: leading zeros are not allowed in numbers");
  EXPECT_EQ(error_text("[1, 00"),
            "t.json: invalid JSON at byte 4: leading zeros are not allowed in numbers");

  // Integers: exact within int64, doubles beyond (as a bigger integer has no
  // exact JSON integer here), out of range beyond a double.
  io::Json big =
      io::parse_json("[18446744073709551615, 18446744073709551616, -9223372036854775809]");
  EXPECT_FALSE(big.at(0).is_integer());
  EXPECT_EQ(big.at(0).as_double(), 18446744073709551616.0);
  EXPECT_EQ(big.at(1).as_double(), 18446744073709551616.0);
  EXPECT_EQ(big.at(2).as_double(), -9223372036854775808.0);
  EXPECT_EQ(error_text("[1" + std::string(400, '0') + "]"),
            "t.json: invalid JSON at byte 1: number out of range");

  EXPECT_EQ(error_text("[\"ab\xff\"]"),
            "t.json: invalid JSON at byte 4: invalid UTF-8 in a string");
  EXPECT_EQ(error_text("[\"\xe2\x82\"]"),
            "t.json: invalid JSON at byte 2: invalid UTF-8 in a string");
  EXPECT_EQ(error_text("[\"\xc3\xa9\x80\"]"),
            "t.json: invalid JSON at byte 4: invalid UTF-8 in a string");
  EXPECT_EQ(error_text("[\"\xed\xa0\x80\"]"),  // a UTF-8 encoded surrogate
            "t.json: invalid JSON at byte 2: invalid UTF-8 in a string");
  EXPECT_EQ(error_text("[\"\xf4\x90\x80\x80\"]"),  // beyond U+10FFFF
            "t.json: invalid JSON at byte 2: invalid UTF-8 in a string");
}

TEST(Json, ErrorMessagesSayWhatWasExpected) {
  EXPECT_EQ(error_text(""),
            "t.json: invalid JSON at byte 0: the text ends where a value was expected");
  EXPECT_EQ(error_text("{"), "t.json: invalid JSON at byte 1: the text ends inside an object");
  EXPECT_EQ(error_text(R"({"a")"),
            "t.json: invalid JSON at byte 4: the text ends where ':' after an object key was "
            "expected");
  EXPECT_EQ(error_text(R"({"a":1)"),
            "t.json: invalid JSON at byte 6: the text ends where ',' or '}' in an object was "
            "expected");
  EXPECT_EQ(error_text(R"({"a":1 "b":2})"),
            "t.json: invalid JSON at byte 7: expected ',' or '}' in an object");
  EXPECT_EQ(error_text("[1 2]"), "t.json: invalid JSON at byte 3: expected ',' or ']' in an array");
  EXPECT_EQ(error_text("[1,]"),
            "t.json: invalid JSON at byte 3: unexpected character ']' where a value was expected");
  EXPECT_EQ(error_text("{,}"), "t.json: invalid JSON at byte 1: expected a string key");
  EXPECT_EQ(error_text("{1:2}"), "t.json: invalid JSON at byte 1: expected a string key");
  EXPECT_EQ(error_text("[tru]"), "t.json: invalid JSON at byte 1: expected 'true'");
  EXPECT_EQ(error_text("[1.]"),
            "t.json: invalid JSON at byte 3: expected a digit after the decimal point");
  EXPECT_EQ(error_text("[1e+]"),
            "t.json: invalid JSON at byte 4: expected a digit in the exponent");
  EXPECT_EQ(error_text(R"({"a\q":1})"),
            "t.json: invalid JSON at byte 4: invalid escape '\\q' in a string");
  EXPECT_EQ(error_text("[\"a\tb\"]"),
            "t.json: invalid JSON at byte 3: unescaped control character in a string");
  EXPECT_EQ(error_text(R"(["ab)"), "t.json: invalid JSON at byte 4: the text ends inside a string");
  EXPECT_EQ(error_text(R"(["\u12x4"])"),
            "t.json: invalid JSON at byte 6: expected 4 hex digits after \\u");
  EXPECT_EQ(error_text(R"(["\u12)"),
            "t.json: invalid JSON at byte 6: the text ends inside a \\u escape");
  EXPECT_EQ(error_text(R"(["\udc00"])"),
            "t.json: invalid JSON at byte 2: unpaired low surrogate in \\u escape");
  for (const char* text :
       {R"(["x\ud800"])", R"(["x\ud800\n"])", R"(["x\ud800\u0041"])", R"(["x\ud800\ud800"])"}) {
    EXPECT_EQ(error_text(text),
              "t.json: invalid JSON at byte 3: high surrogate in \\u escape without its low "
              "surrogate")
        << text;
  }
}

// A random JSON value: every type, integers over all of int64, doubles from
// random bits (subnormals and extremes included), strings with escapes,
// control characters and multi-byte UTF-8, nesting a few levels deep.
io::Json random_json(std::mt19937_64& rng, int depth) {
  auto pick = [&](uint64_t n) { return rng() % n; };
  const uint64_t kind = pick(depth >= 4 ? 5 : 7);
  switch (kind) {
    case 0: return io::Json();
    case 1: return io::Json(pick(2) == 1);
    case 2: {
      const uint64_t bits = rng();
      return io::Json(static_cast<int64_t>(pick(2) ? bits : bits % 1000) - (pick(2) ? 500 : 0));
    }
    case 3: {
      double d;
      do {
        d = std::bit_cast<double>(rng());
      } while (!std::isfinite(d));
      const double simple[] = {0.0, -0.0, 2.0, 0.1, 1e15, 1e16, 1e-5, 123.456, 5e-324};
      return io::Json(pick(3) == 0 ? simple[pick(std::size(simple))] : d);
    }
    case 4: {
      static const char* pieces[] = {"a",
                                     "Z",
                                     " ",
                                     "\"",
                                     "\\",
                                     "/",
                                     "\n",
                                     "\t",
                                     "\x01",
                                     "\x1f",
                                     "\x7f",
                                     "\xc3\xa9",
                                     "\xe2\x82\xac",
                                     "\xf0\x9f\x98\x80",
                                     "\xef\xbf\xbf",
                                     "\xf4\x8f\xbf\xbf",
                                     "u0041",
                                     "0"};
      std::string s;
      for (uint64_t i = pick(12); i > 0; --i) s += pieces[pick(std::size(pieces))];
      return io::Json(s);
    }
    case 5: {
      io::Json a = io::Json::array();
      for (uint64_t i = pick(6); i > 0; --i) a.push_back(random_json(rng, depth + 1));
      return a;
    }
    default: {
      io::Json o = io::Json::object();
      for (uint64_t i = pick(6); i > 0; --i)
        o[format("k{}-{}", i, pick(3))] = random_json(rng, depth + 1);
      return o;
    }
  }
}

TEST(Json, RandomValuesRoundTrip) {
  std::mt19937_64 rng(20261124);
  int containers = 0;
  for (int i = 0; i < 400; ++i) {
    const io::Json v = random_json(rng, 0);
    containers += v.is_array() || v.is_object();
    for (int indent : {-1, 2}) {
      const std::string text = v.dump(indent);
      const io::Json again = io::parse_json(text);
      EXPECT_EQ(again, v) << text;
      // Same types too (== takes 2 and 2.0 for equal): the text is the same.
      EXPECT_EQ(again.dump(indent), text);
    }
  }
  EXPECT_GT(containers, 100);
}

TEST(Json, WritesDoublesSoTheyReadBackExactly) {
  EXPECT_EQ(io::Json(2.0).dump(), "2.0");
  EXPECT_EQ(io::Json(-0.0).dump(), "-0.0");
  EXPECT_EQ(io::Json(0.1).dump(), "0.1");
  EXPECT_EQ(io::Json(1e-5).dump(), "1e-05");
  EXPECT_EQ(io::Json(5e-324).dump(), "5e-324");
  EXPECT_EQ(io::Json(std::numeric_limits<double>::max()).dump(), "1.7976931348623157e+308");
  EXPECT_EQ(io::Json(int64_t{-9223372036854775807 - 1}).dump(), "-9223372036854775808");
  try {
    io::Json::Array a{io::Json(1.0), io::Json(std::numeric_limits<double>::quiet_NaN())};
    io::Json(a).dump();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "cannot write nan as JSON: JSON has no NaN or Infinity");
  }
  try {
    io::Json(-std::numeric_limits<double>::infinity()).dump(2);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "cannot write -inf as JSON: JSON has no NaN or Infinity");
  }
}

}  // namespace
}  // namespace weft::io
