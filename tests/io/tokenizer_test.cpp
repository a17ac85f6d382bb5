#include "weft/io/tokenizer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "weft/core/error.h"

namespace weft::io {
namespace {

TEST(ByteTokenizer, RoundTripsEveryByte) {
  io::ByteTokenizer tok;
  EXPECT_EQ(tok.vocab_size(), 256);
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  all += "Hello, wörld! \xe2\x82\xac";
  std::vector<int32_t> ids = tok.encode(all);
  ASSERT_EQ(ids.size(), all.size());
  for (int b = 0; b < 256; ++b) EXPECT_EQ(ids[static_cast<size_t>(b)], b);
  EXPECT_EQ(tok.decode(ids), all);
  EXPECT_TRUE(tok.encode("").empty());
  EXPECT_EQ(tok.decode({}), "");
}

TEST(ByteTokenizer, DecodeRejectsIdsOutsideTheVocabulary) {
  io::ByteTokenizer tok;
  for (int32_t bad : {256, -1, 50256}) {
    std::vector<int32_t> ids = {72, 105, bad};
    try {
      tok.decode(ids);
      FAIL() << "no error for " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("token id " + std::to_string(bad) + " at position 2"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace weft::io
