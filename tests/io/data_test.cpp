#include "weft/io/data.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "testing.h"
#include "weft/io/tokenizer.h"

namespace weft::io {
namespace {

namespace fs = std::filesystem;

using weft::testing::TempDir;

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

using weft::testing::error_of;

std::vector<int32_t> values(const Tensor& t) {
  const int32_t* p = t.data<int32_t>();
  return {p, p + t.numel()};
}

// 0, 1, 2, ... as text-free token data, so windows reveal where they start.
io::TokenData counting(int64_t n) {
  io::TokenData d;
  for (int64_t i = 0; i < n; ++i) d.tokens.push_back(static_cast<int32_t>(i % 50000));
  d.source = "counting";
  return d;
}

TEST(Data, LoadsTextThroughTheByteTokenizer) {
  TempDir dir;
  const std::string path = dir.path("a.txt");
  write_bytes(path, "Hello\n\xc3\xa9!");
  io::TokenData d = io::load_tokens(path);
  EXPECT_EQ(d.format, io::TokenData::Format::text);
  EXPECT_EQ(d.tokens, io::ByteTokenizer().encode("Hello\n\xc3\xa9!"));
  EXPECT_EQ(d.source, path);
  EXPECT_EQ(d.vocab_needed(), 0xc3 + 1);
}

TEST(Data, ShardRoundTrip) {
  TempDir dir;
  const std::string path = dir.path("tokens.bin");
  std::vector<uint16_t> tokens = {50256, 0, 1, 65535, 464, 2068};
  io::write_token_shard(path, tokens);
  EXPECT_EQ(fs::file_size(path), 1024 + 2 * tokens.size());
  io::TokenData d = io::load_tokens(path);
  EXPECT_EQ(d.format, io::TokenData::Format::shard);
  EXPECT_EQ(d.tokens, std::vector<int32_t>(tokens.begin(), tokens.end()));
  EXPECT_EQ(d.vocab_needed(), 65536);
  // The magic alone identifies a shard, whatever the name.
  fs::copy_file(path, dir.path("tokens.dat"));
  EXPECT_EQ(io::load_tokens(dir.path("tokens.dat")).format, io::TokenData::Format::shard);
}

TEST(Data, RejectsBadShardsSayingWhatIsWrong) {
  TempDir dir;
  const std::string good_path = dir.path("good.bin");
  io::write_token_shard(good_path, std::vector<uint16_t>(100, 7));
  std::ifstream in(good_path, std::ios::binary);
  const std::string good{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  auto with_int = [&](int index, int32_t value) {
    std::string b = good;
    std::memcpy(b.data() + 4 * index, &value, 4);
    return b;
  };
  const std::string path = dir.path("bad.bin");
  auto load_error = [&](const std::string& bytes) {
    write_bytes(path, bytes);
    return error_of([&] { io::load_tokens(path); });
  };
  EXPECT_EQ(load_error(with_int(0, 12345)),
            path +
                " is not an llm.c token shard: its magic number is 12345, expected 20240520 "
                "(GPT-2 tokens) or 20240801 (llama-3 tokens); a .bin --data file must be a "
                "shard from llm.c's data scripts (give text files another extension)");
  EXPECT_EQ(load_error(with_int(1, 2)), path +
                                            " is an llm.c token shard (magic 20240520) of "
                                            "version 2; weft reads version 1 (uint16 tokens)");
  EXPECT_EQ(load_error(good.substr(0, 1024 + 150)),
            path +
                " is truncated: header says 100 tokens (200 bytes), file has 150 bytes of "
                "tokens");
  EXPECT_EQ(load_error(good.substr(0, 500)),
            path +
                " is truncated: an llm.c token shard starts with a 1024-byte header, the file "
                "has 500 bytes");
  EXPECT_EQ(load_error(good + "xy"),
            path +
                " is corrupted: header says 100 tokens (200 bytes) but 202 bytes follow the "
                "header");
  EXPECT_EQ(load_error(with_int(2, -3)),
            path + " is corrupted: its header gives a negative token count -3");
}

TEST(Data, MissingEmptyAndShortFilesSayWhatToDo) {
  TempDir dir;
  const std::string missing = dir.path("nope.txt");
  EXPECT_EQ(error_of([&] { io::load_tokens(missing); }),
            "cannot open data file " + missing +
                ": No such file or directory; pass an existing --data file");
  const std::string empty = dir.path("empty.txt");
  write_bytes(empty, "");
  EXPECT_EQ(
      error_of([&] { io::load_tokens(empty); }),
      "data file " + empty + " is empty; pass a --data file with text or an llm.c .bin shard");
  const std::string shorty = dir.path("short.txt");
  write_bytes(shorty, std::string(37, 'x'));
  EXPECT_EQ(error_of([&] { io::Dataset(io::load_tokens(shorty), 64); }),
            shorty +
                " has 37 tokens; need at least 2·(seq+1) = 130 for seq 64 (a training and "
                "a validation window); pass a larger --data file");
  EXPECT_NO_THROW(io::Dataset(counting(130), 64));
}

TEST(Data, ValidationSplitIsTheDisjointTail) {
  io::Dataset d(counting(10000), 16, 0.1);
  EXPECT_EQ(d.train().size(), 9000u);
  EXPECT_EQ(d.val().size(), 1000u);
  EXPECT_EQ(d.train().back(), 8999);
  EXPECT_EQ(d.val().front(), 9000);
  // A tiny file still gets a full validation window.
  io::Dataset small(counting(40), 16, 0.1);
  EXPECT_EQ(small.val().size(), 17u);
  EXPECT_EQ(small.train().size(), 23u);

  // No training window reaches a validation token, no validation window a training one.
  io::Sampler sampler(d, 5, 64);
  for (int64_t step = 0; step < 50; ++step) {
    io::Batch b = sampler.global(step, 0);
    for (int32_t t : values(b.targets)) EXPECT_LT(t, 9000);
  }
  const int64_t windows = d.val_windows();
  EXPECT_EQ(windows, (1000 - 1) / 16);
  const int64_t batches = d.val_batches(8, 1000);
  EXPECT_EQ(batches, windows / 8);
  std::set<int32_t> first_inputs;
  for (int64_t i = 0; i < batches; ++i) {
    io::Batch b = d.val_batch(i, 8);
    std::vector<int32_t> in = values(b.inputs), tg = values(b.targets);
    for (size_t k = 0; k < in.size(); ++k) {
      EXPECT_GE(in[k], 9000);
      EXPECT_EQ(tg[k], in[k] + 1);
    }
    for (int64_t r = 0; r < 8; ++r) first_inputs.insert(in[static_cast<size_t>(r * 16)]);
  }
  EXPECT_EQ(static_cast<int64_t>(first_inputs.size()), batches * 8);  // windows do not repeat
  EXPECT_EQ(*first_inputs.begin(), 9000);
  EXPECT_EQ(d.val_batches(8, 3), 3);
  // Fewer windows than a batch: one batch that wraps around.
  EXPECT_EQ(small.val_batches(4, 10), 1);
  EXPECT_EQ(values(small.val_batch(0, 4).inputs)[16], 23);
}

TEST(Data, SamplerIsAPureFunctionOfSeedAndStep) {
  io::Dataset d(counting(5000), 32);
  io::Sampler a(d, 1234, 8), b(d, 1234, 8), other_seed(d, 1235, 8);
  io::Batch x = a.global(7, 1);
  io::Batch y = b.global(7, 1);
  EXPECT_EQ(values(x.inputs), values(y.inputs));
  EXPECT_EQ(values(x.targets), values(y.targets));
  EXPECT_EQ(x.inputs.shape(), Shape({8, 32}));
  EXPECT_NE(values(a.global(8, 1).inputs), values(x.inputs));
  EXPECT_NE(values(a.global(7, 0).inputs), values(x.inputs));
  EXPECT_NE(values(other_seed.global(7, 1).inputs), values(x.inputs));
  // Targets are inputs shifted by one token.
  std::vector<int32_t> in = values(x.inputs), tg = values(x.targets);
  for (size_t k = 0; k < in.size(); ++k) EXPECT_EQ(tg[k], in[k] + 1);
  // A sampler created later (a resumed run) repeats step 7 exactly.
  io::Sampler resumed(d, 1234, 8);
  EXPECT_EQ(values(resumed.global(7, 1).inputs), values(x.inputs));
}

TEST(Data, SamplerCoversTheTrainingSplit) {
  io::Dataset d(counting(2000), 8);
  io::Sampler s(d, 0, 16);
  const int64_t starts = static_cast<int64_t>(d.train().size()) - 8;
  std::set<int64_t> seen;
  for (int64_t step = 0; step < 2000; ++step) {
    for (int64_t i = 0; i < 16; ++i) {
      int64_t w = s.window_start(step, 0, i);
      ASSERT_GE(w, 0);
      ASSERT_LT(w, starts);
      seen.insert(w);
    }
  }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), starts);  // 32000 draws over 1792 starts
}

TEST(Data, SlicesConcatenateToTheGlobalBatch) {
  io::Dataset d(counting(5000), 16);
  io::Sampler s(d, 42, 12);
  const io::Batch global = s.global(3, 2);
  const std::vector<int32_t> all = values(global.inputs);
  for (int dp : {1, 2, 3}) {
    for (int sub : {1, 2}) {
      if (12 % (dp * sub)) continue;
      std::vector<int32_t> joined, joined_sliced;
      for (int r = 0; r < dp; ++r) {
        for (int t = 0; t < sub; ++t) {
          io::BatchSlice part{.dp_rank = r, .dp_size = dp, .sub_rank = t, .sub_size = sub};
          io::Batch local = s.next_batch(3, 2, part);
          EXPECT_EQ(local.size(), 12 / (dp * sub));
          std::vector<int32_t> v = values(local.inputs);
          joined.insert(joined.end(), v.begin(), v.end());
          std::vector<int32_t> w = values(slice(global, part).inputs);
          joined_sliced.insert(joined_sliced.end(), w.begin(), w.end());
        }
      }
      EXPECT_EQ(joined, all) << "dp " << dp << " sub " << sub;
      EXPECT_EQ(joined_sliced, all) << "dp " << dp << " sub " << sub;
    }
  }
  io::BatchSlice r1{.dp_rank = 1, .dp_size = 2};
  EXPECT_EQ(r1.rows(12), (std::pair<int64_t, int64_t>{6, 12}));
  io::BatchSlice r1t1{.dp_rank = 1, .dp_size = 2, .sub_rank = 1, .sub_size = 3};
  EXPECT_EQ(r1t1.rows(12), (std::pair<int64_t, int64_t>{8, 10}));
  EXPECT_EQ(error_of([&] { io::BatchSlice{.dp_rank = 0, .dp_size = 5}.rows(12); }),
            "the global batch of 12 samples does not split evenly over 5 data-parallel ranks; "
            "use a batch that is a multiple of 5");
  EXPECT_NE(
      error_of([&] { io::BatchSlice{.dp_size = 2, .sub_size = 4}.rows(12); }).find("multiple of 8"),
      std::string::npos);
}

TEST(Data, DefaultCorpusIsMegabytesOfEnglish) {
  if (!fs::is_directory(io::kFortunesDir)) {
    GTEST_SKIP() << io::kFortunesDir << " is missing: install Debian's fortunes package "
                 << "(scripts/install-deps.sh)";
  }
  const std::string text = io::default_corpus_text();
  EXPECT_GT(text.size(), 1u << 20);
  EXPECT_EQ(text.find("\n%\n"), std::string::npos);  // separators stripped
  EXPECT_NE(text.find("\n\n"), std::string::npos);   // entries apart
  int64_t printable = 0;
  for (char c : text) printable += (c >= 32 && c < 127) || c == '\n' || c == '\t';
  EXPECT_GT(static_cast<double>(printable) / static_cast<double>(text.size()), 0.99);
  size_t the = 0;
  for (size_t p = text.find(" the "); p != std::string::npos; p = text.find(" the ", p + 1)) ++the;
  EXPECT_GT(the, 5000u);
  EXPECT_EQ(io::default_corpus_text(), text);  // fixed order
  io::TokenData d = io::default_corpus();
  EXPECT_EQ(d.size(), static_cast<int64_t>(text.size()));
  EXPECT_LE(d.vocab_needed(), 256);
}

TEST(Data, DefaultCorpusParsesFortuneFilesInOrder) {
  TempDir dir;
  fs::create_directory(dir.path("fortunes"));
  write_bytes(dir.path("fortunes/b"), "second file\n%\n");
  write_bytes(dir.path("fortunes/a"), "one\nline two\n%\nthree\n%\n%\nfour");
  write_bytes(dir.path("fortunes/a.dat"), "binary index");
  fs::create_symlink("a", dir.path("fortunes/a.u8"));
  fs::create_directory(dir.path("fortunes/off"));
  write_bytes(dir.path("fortunes/off/c"), "offensive\n");
  EXPECT_EQ(io::default_corpus_text(dir.path("fortunes")),
            "one\nline two\n\nthree\n\nfour\n\nsecond file\n");
  const std::string missing = dir.path("none");
  EXPECT_EQ(error_of([&] { io::default_corpus_text(missing); }),
            "the default corpus is Debian's fortunes package, but " + missing +
                " does not exist; install it with `apt-get install fortunes` "
                "(scripts/install-deps.sh and `make train` do) or pass --data FILE");
}

}  // namespace
}  // namespace weft::io
