// The data users bring: several files and globs, llm.c's uint32 (llama-3)
// shards, a separate validation set, files that are not text named for what
// they are, and `weft train` taking the shards' vocabulary.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

#include "testing.h"
#include "weft/io/data.h"
#include "weft/io/safetensors.h"

namespace weft::io {
namespace {

namespace fs = std::filesystem;
using weft::testing::TempDir;

using weft::testing::error_of;

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// An llm.c llama-3 shard: magic 20240801, version 7, uint32 tokens.
void write_u32_shard(const std::string& path, const std::vector<uint32_t>& tokens,
                     int32_t version = io::kShardVersionU32, int64_t drop_bytes = 0) {
  std::vector<int32_t> header(io::kShardHeaderInts, 0);
  header[0] = io::kShardMagicU32;
  header[1] = version;
  header[2] = static_cast<int32_t>(tokens.size());
  std::string bytes(reinterpret_cast<const char*>(header.data()), header.size() * 4);
  bytes.append(reinterpret_cast<const char*>(tokens.data()), tokens.size() * 4);
  bytes.resize(bytes.size() - static_cast<size_t>(drop_bytes));
  write_bytes(path, bytes);
}

std::vector<uint16_t> counting(int n, int from = 0) {
  std::vector<uint16_t> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<uint16_t>(from + i);
  return v;
}

TEST(DataFiles, Uint32ShardsRoundTripAndBadOnesSayWhy) {
  TempDir dir;
  const std::vector<uint32_t> tokens = {128000, 0, 9906, 128255, 1};
  write_u32_shard(dir.path("llama.bin"), tokens);
  const io::TokenData d = io::load_tokens(dir.path("llama.bin"));
  EXPECT_EQ(d.format, io::TokenData::Format::shard_u32);
  EXPECT_EQ(d.tokens, std::vector<int32_t>(tokens.begin(), tokens.end()));
  EXPECT_EQ(io::data_format(dir.path("llama.bin")), io::TokenData::Format::shard_u32);
  EXPECT_EQ(io::tokenizer_vocab(d.format), io::kLlama3Vocab);

  write_u32_shard(dir.path("v9.bin"), tokens, 9);
  EXPECT_NE(error_of([&] { io::load_tokens(dir.path("v9.bin")); })
                .find("of version 9; weft reads "
                      "version 7 (uint32 tokens)"),
            std::string::npos);
  write_u32_shard(dir.path("short.bin"), tokens, io::kShardVersionU32, 3);
  EXPECT_NE(error_of([&] { io::load_tokens(dir.path("short.bin")); }).find("is truncated"),
            std::string::npos);
  write_u32_shard(dir.path("huge.bin"), {1, 0x80000000u});
  EXPECT_NE(error_of([&] { io::load_tokens(dir.path("huge.bin")); }).find("token 1 is 2147483648"),
            std::string::npos);
}

TEST(DataFiles, ListsAndGlobsConcatenateInOrder) {
  TempDir dir;
  io::write_token_shard(dir.path("fineweb_train_000002.bin"), counting(3, 20));
  io::write_token_shard(dir.path("fineweb_train_000001.bin"), counting(3, 10));
  io::write_token_shard(dir.path("fineweb_val_000000.bin"), counting(3, 0));
  const io::TokenData globbed = io::load_token_files(dir.path("fineweb_train_*.bin"));
  EXPECT_EQ(globbed.tokens, (std::vector<int32_t>{10, 11, 12, 20, 21, 22}));
  EXPECT_EQ(globbed.format, io::TokenData::Format::shard);
  const io::TokenData listed = io::load_token_files(dir.path("fineweb_val_000000.bin") + "," +
                                                    dir.path("fineweb_train_*.bin"));
  EXPECT_EQ(listed.tokens, (std::vector<int32_t>{0, 1, 2, 10, 11, 12, 20, 21, 22}));
  EXPECT_NE(listed.source.find("3 files"), std::string::npos) << listed.source;

  EXPECT_NE(
      error_of([&] { io::load_token_files(dir.path("nothing_*.bin")); }).find("matches no file"),
      std::string::npos);
  const std::string twice = dir.path("fineweb_val_000000.bin");
  EXPECT_NE(error_of([&] { io::load_token_files(twice + "," + twice); }).find("is named twice"),
            std::string::npos);
  write_bytes(dir.path("notes.txt"), "plain text");
  EXPECT_NE(error_of([&] {
              io::load_token_files(twice + "," + dir.path("notes.txt"));
            }).find("hold different kinds of data"),
            std::string::npos);
  EXPECT_NE(error_of([&] { io::load_token_files(twice + ","); }).find("has an empty entry"),
            std::string::npos);
}

TEST(DataFiles, FilesThatAreNotTextAreNamed) {
  TempDir dir;
  write_bytes(dir.path("corpus.txt.gz"), std::string("\x1f\x8b\x08\x00rest", 8));
  EXPECT_NE(error_of([&] {
              io::load_tokens(dir.path("corpus.txt.gz"));
            }).find("looks like a gzip-compressed file: decompress it first"),
            std::string::npos);
  io::write_safetensors(dir.path("model.safetensors"),
                        std::vector<io::NamedTensor>{{"w", Tensor::zeros({2, 2})}});
  EXPECT_NE(error_of([&] {
              io::load_tokens(dir.path("model.safetensors"));
            }).find("looks like a safetensors file (model weights), not training data"),
            std::string::npos);
  write_bytes(dir.path("blob"), std::string("abc\0def", 7));
  EXPECT_NE(error_of([&] { io::load_tokens(dir.path("blob")); }).find("binary data (it has NUL"),
            std::string::npos);
  write_bytes(dir.path("ok.txt"), "caf\xc3\xa9 au lait\n");
  EXPECT_EQ(io::load_tokens(dir.path("ok.txt")).format, io::TokenData::Format::text);
}

// A FIFO would block the open until a writer came, a character device never
// ends: both are refused before anything opens them, as a directory is.
TEST(DataFiles, PathsThatAreNotRegularFilesAreRefusedWithoutReading) {
  TempDir dir;
  const std::string fifo = dir.path("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const auto& [path, kind] : {std::pair<std::string, std::string>{fifo, "a FIFO"},
                                   {"/dev/zero", "a character device"},
                                   {dir.path(""), "a directory"}}) {
    SCOPED_TRACE(path);
    for (const auto& load : std::vector<std::function<void()>>{
             [&] { (void)io::load_tokens(path); }, [&] { (void)io::data_format(path); },
             [&] { (void)io::load_token_files(path + "," + path); }}) {
      const std::string message = error_of(load);
      EXPECT_NE(message.find("is " + kind), std::string::npos) << message;
      EXPECT_NE(message.find("regular"), std::string::npos) << message;
    }
  }
}

TEST(DataFiles, ASeparateValidationSetIsUsedWhole) {
  io::TokenData train = io::text_tokens(std::string(40, 'a'), "train");
  io::TokenData val = io::text_tokens(std::string(20, 'b'), "val");
  io::Dataset d(std::move(train), std::move(val), 8);
  EXPECT_EQ(d.train().size(), 40u);
  EXPECT_EQ(d.val().size(), 20u);
  for (int32_t t : d.train()) ASSERT_EQ(t, 'a');
  for (int32_t t : d.val()) ASSERT_EQ(t, 'b');
  EXPECT_EQ(d.val_windows(), 2);
  EXPECT_NE(error_of([&] {
              io::Dataset(io::text_tokens("abc", "tiny"),
                          io::text_tokens(std::string(20, 'b'), "v"), 8);
            }).find("tiny has 3 tokens"),
            std::string::npos);
}

#ifndef WEFT_CLI_PATH
#error "WEFT_CLI_PATH (the weft_cli binary) is set by tests/CMakeLists.txt"
#endif
// `weft train` on llm.c shards given as a glob, with llm.c's val shard: the
// vocabulary becomes GPT-2's without --vocab.
TEST(DataFiles, TrainTakesGlobbedShardsAndTheirVocabulary) {
  const fs::path weft = WEFT_CLI_PATH;
  ASSERT_TRUE(fs::is_regular_file(weft)) << "no " << weft;
  TempDir dir;
  std::vector<uint16_t> tokens(600);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>((i * 7919) % 50257);
  io::write_token_shard(dir.path("tiny_train_000001.bin"), tokens);
  io::write_token_shard(dir.path("tiny_train_000002.bin"), tokens);
  io::write_token_shard(dir.path("tiny_val_000000.bin"), counting(100, 50000));
  const std::string cmd = weft.string() + " train --data '" + dir.path("tiny_train_*.bin") +
                          "' --val-data " + dir.path("tiny_val_000000.bin") +
                          " --layers 1 --width 32 --heads 2 --seq 16 --micro-batch 2 --tp 1"
                          " --steps 2 --eval-every 2 --eval-batches 1 --sample-tokens 0"
                          " --json 2>&1";
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  ASSERT_EQ(::pclose(p), 0) << out;
  EXPECT_NE(out.find("\"steps\":2"), std::string::npos) << out;
  // ln(50257) = 10.8: an untrained model over GPT-2's vocabulary.
  EXPECT_NE(out.find("\"val_loss_first\":10.8"), std::string::npos) << out;
}

}  // namespace
}  // namespace weft::io
