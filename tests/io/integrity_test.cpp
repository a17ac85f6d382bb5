// Checkpoint integrity: checksums catch a flipped bit in tensor data, in a
// safetensors header, in index.json and in a rank file; checkpoints without
// checksums still load; NaN and infinite values are named where they enter;
// `weft eval`, `weft generate` and `weft checkpoint verify` on such checkpoints.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <string>
#include <thread>

#include "contexts.h"
#include "testing.h"
#include "weft/comm/local.h"
#include "weft/core/threads.h"
#include "weft/io/checkpoint.h"
#include "weft/io/checkpoint_verify.h"
#include "weft/io/safetensors.h"

namespace weft::io {
namespace {

namespace fs = std::filesystem;
using weft::testing::TempDir;

// A model `weft eval` and `weft generate` can build from the checkpoint
// (byte vocabulary), small enough for a test.
nn::GptConfig config() {
  nn::GptConfig c;
  c.vocab = 256;
  c.seq = 16;
  c.layers = 1;
  c.width = 16;
  c.heads = 4;
  return c;
}

// Saves the initialized model with AdamW moments at world `world_size`, TP
// `world_size`; `poison(model, optimizer)` may change values first.
void save(const std::string& dir, int world_size = 1,
          const std::function<void(nn::Gpt&, optim::AdamW&)>& poison = {}) {
  comm::run_local(world_size, [&](comm::ProcessGroup& world) {
    set_num_threads(1);
    comm::Grid grid(world, "tp-dp", {{"tp", world_size}});
    nn::GptConfig cfg = config();
    nn::Gpt model(ctx_of(grid.group_ptr("tp"), parallel::SequenceParallel::off, DType::f32, 3),
                  cfg);
    optim::AdamW opt(model.parameters(), {});
    for (size_t i = 0; i < opt.parameters().size(); ++i) {
      opt.first_moments()[i].fill(0.25f);
      opt.second_moments()[i].fill(0.5f);
    }
    if (poison) poison(model, opt);
    io::TrainState state;
    state.step = 3;
    state.rng = parallel::RngTracker(3, grid.rank_in("tp")).state();
    state.config = io::model_shape_json(config());
    io::save_checkpoint(dir, world, grid, model, &opt, state);
  });
}

// Loads DIR at world `world_size` (TP = world size), with the optimizer.
void load(const std::string& dir, int world_size = 1, io::ReadOptions options = {}) {
  comm::run_local(world_size, [&](comm::ProcessGroup& world) {
    set_num_threads(1);
    comm::Grid grid(world, "tp-dp", {{"tp", world_size}});
    nn::GptConfig cfg = config();
    nn::Gpt model(ctx_of(grid.group_ptr("tp"), parallel::SequenceParallel::off, DType::f32, 3),
                  cfg);
    optim::AdamW opt(model.parameters(), {});
    io::load_checkpoint(dir, world, grid, model, &opt, options);
  });
}

using weft::testing::error_of;

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Flips bit 0 of byte `at` of `path`.
void flip(const fs::path& path, size_t at) {
  std::string b = read_bytes(path);
  ASSERT_LT(at, b.size());
  b[at] = static_cast<char>(b[at] ^ 1);
  write_bytes(path, b);
}

// Byte offset in its file of byte 5 of tensor `name`'s data.
size_t data_byte(const fs::path& file, const std::string& name) {
  io::SafetensorsFile f(file.string());
  uint64_t header = 0;
  std::memcpy(&header, read_bytes(file).data(), 8);
  return 8 + header + static_cast<size_t>(f.info(name).begin) + 5;
}

// Checks that `message` names all of `parts`.
void expect_names(const std::string& message, std::initializer_list<const char*> parts) {
  for (const char* p : parts) EXPECT_NE(message.find(p), std::string::npos) << p << "\n" << message;
}

TEST(Integrity, BitFlipInModelDataIsRefusedAtEveryLayout) {
  TempDir tmp;
  const std::string dir = tmp.path("ck");
  save(dir, 2);
  const fs::path file = fs::path(dir) / "model-rank1.safetensors";
  flip(file, data_byte(file, "h.0.mlp.fc1.weight"));
  for (int world : {1, 2}) {
    expect_names(error_of([&] { load(dir, world); }),
                 {"model-rank1.safetensors is damaged", "tensor h.0.mlp.fc1.weight has checksum ",
                  "index.json records ", "use another checkpoint"});
  }
}

TEST(Integrity, BitFlipInOptimizerDataIsRefused) {
  TempDir tmp;
  const std::string dir = tmp.path("ck");
  save(dir);
  const fs::path file = fs::path(dir) / "optimizer-rank0.safetensors";
  flip(file, data_byte(file, "h.0.attn.proj.weight.exp_avg_sq"));
  expect_names(error_of([&] { load(dir); }),
               {"optimizer-rank0.safetensors is damaged",
                "tensor h.0.attn.proj.weight.exp_avg_sq has checksum", "use another checkpoint"});
}

TEST(Integrity, BitFlipInHeaderMetadataIsRefused) {
  TempDir tmp;
  const std::string dir = tmp.path("ck");
  save(dir);
  const fs::path file = fs::path(dir) / "model-rank0.safetensors";
  // A digit of a tensor's metadata ("valid_rows": -1 becomes -0): still valid JSON.
  const size_t at = read_bytes(file).find("valid_rows\\\":-1");
  ASSERT_NE(at, std::string::npos);
  flip(file, at + 14);
  expect_names(error_of([&] { load(dir); }),
               {"model-rank0.safetensors is damaged: its header has checksum", "index.json records",
                "use another checkpoint"});
}

TEST(Integrity, BitFlipInIndexIsRefused) {
  TempDir tmp;
  const std::string dir = tmp.path("ck");
  save(dir);
  const fs::path index = fs::path(dir) / "index.json";
  const size_t at = read_bytes(index).find("\"step\": 3");  // 3 becomes 2
  ASSERT_NE(at, std::string::npos);
  flip(index, at + 8);
  expect_names(error_of([&] { load(dir); }), {"index.json is damaged: its content has checksum",
                                              "but the file records", "use another checkpoint"});
  // The key of the checksum itself, "xxh3" becoming "xxh2".
  save(dir);
  const size_t key = read_bytes(index).rfind("\"xxh3\"");
  flip(index, key + 4);
  expect_names(error_of([&] { load(dir); }), {"index.json is damaged", "use another checkpoint"});
}

TEST(Integrity, BitFlipInRankFileIsRefused) {
  TempDir tmp;
  const std::string dir = tmp.path("ck");
  save(dir);
  const fs::path rank = fs::path(dir) / "rank0.json";
  const size_t at = read_bytes(rank).find("\"offset\": 0");  // 0 becomes 1
  ASSERT_NE(at, std::string::npos);
  flip(rank, at + 10);
  expect_names(error_of([&] { load(dir); }),
               {"rank0.json is damaged: its content has checksum", "use another checkpoint"});
}

// What a checkpoint of the earlier format holds: no checksum members.
void strip_checksums(const std::string& dir) {
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".json") continue;
    bool sealed = false;
    io::Json j = io::parse_sealed_json(read_bytes(e.path()), e.path().string(), sealed);
    ASSERT_TRUE(sealed) << e.path();
    auto& members = j.as_object();
    std::erase_if(members, [](const auto& m) { return m.first == "header_xxh3"; });
    for (io::Json* section : {j.find("tensors") ? &j["tensors"] : nullptr,
                              j.find("optimizer") ? &j["optimizer"]["tensors"] : nullptr}) {
      if (!section) continue;
      for (auto& [name, t] : section->as_object()) {
        for (io::Json& s : t["shards"].as_array()) {
          std::erase_if(s.as_object(), [](const auto& m) { return m.first == "xxh3"; });
        }
      }
    }
    write_bytes(e.path(), j.dump(2) + "\n");
  }
}

TEST(Integrity, CheckpointWithoutChecksumsLoadsWithANote) {
  TempDir tmp;
  const std::string dir = tmp.path("ck");
  save(dir);
  strip_checksums(dir);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(error_of([&] { load(dir); }), "");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("carries no checksums (written by an earlier weft): it loads unverified"),
            std::string::npos)
      << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  for (const io::FileVerdict& v : io::verify_checkpoint(dir))
    EXPECT_TRUE(v.ok) << v.file << v.detail;
}

TEST(Integrity, NonFiniteParameterAndMomentAreNamed) {
  TempDir tmp;
  const std::string dir = tmp.path("ck");
  save(dir, 1, [](nn::Gpt& model, optim::AdamW&) {
    for (nn::Parameter* p : model.parameters()) {
      if (p->name == "h.0.ln_2.weight") p->value.data<float>()[3] = std::nanf("");
    }
  });
  expect_names(error_of([&] { load(dir); }),
               {"model-rank0.safetensors: parameter h.0.ln_2.weight holds 1 NaN and 0 infinite "
                "values of 16 (the first at element 3)",
                "use an earlier checkpoint"});
  EXPECT_EQ(error_of([&] { load(dir, 1, {.allow_nonfinite = true}); }), "");
  // Without checksums to vouch for the writer's count, the values are scanned.
  strip_checksums(dir);
  expect_names(error_of([&] { load(dir, 1, {.note_unverified = false}); }),
               {"model-rank0.safetensors: parameter h.0.ln_2.weight holds 1 NaN"});

  save(dir, 1, [](nn::Gpt&, optim::AdamW& opt) {
    opt.second_moments()[0].data<float>()[0] = std::numeric_limits<float>::infinity();
  });
  expect_names(error_of([&] { load(dir); }), {"optimizer-rank0.safetensors: optimizer moment ",
                                              ".exp_avg_sq holds 0 NaN and 1 "
                                              "infinite value"});
}

// ---- a rank that hangs while the others save ----

// The model, but asking for its parameters takes `stall` (the rank is stuck
// in the middle of writing its files).
class Stalling : public nn::Module {
 public:
  Stalling(nn::Module& inner, std::chrono::milliseconds stall) : inner_(inner), stall_(stall) {}
  Tensor forward(nn::Ctx&, const Tensor& x) override { return x; }
  Tensor backward(nn::Ctx&, const Tensor& dy) override { return dy; }
  std::vector<nn::Module*> children() override {
    std::this_thread::sleep_for(stall_);
    return {&inner_};
  }

 private:
  nn::Module& inner_;
  std::chrono::milliseconds stall_;
};

std::map<std::string, std::string> snapshot(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out[e.path().filename()] = read_bytes(e.path());
  return out;
}

// Rank 1 is stuck writing its files for 3 s; the collective timeout is 0.5 s.
TEST(SaveFaults, RankThatHangsWhileOthersSaveTimesOutAndTheLastCheckpointStays) {
  using std::chrono::milliseconds;
  TempDir tmp;
  const std::string dir = tmp.path("ck");
  save(dir, 2);
  const auto before = snapshot(dir);
  std::string errors[2];
  double seconds[2] = {0, 0};
  comm::run_local(2, [&](comm::ProcessGroup& world) {
    set_num_threads(1);
    world.set_timeout(milliseconds(500));
    comm::Grid grid(world, "tp-dp", {{"tp", 2}});
    nn::GptConfig cfg = config();
    nn::Gpt model(ctx_of(grid.group_ptr("tp"), parallel::SequenceParallel::off, DType::f32, 3),
                  cfg);
    optim::AdamW opt(model.parameters(), {});
    Stalling saved(model, milliseconds(world.rank() == 1 ? 3000 : 0));
    io::TrainState state;
    state.rng = parallel::RngTracker(3, grid.rank_in("tp")).state();
    const auto t0 = std::chrono::steady_clock::now();
    try {
      io::save_checkpoint(dir, world, grid, saved, &opt, state);
    } catch (const Error& e) {
      errors[world.rank()] = e.what();
    }
    seconds[world.rank()] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });
  // Rank 0 gives up after the timeout, naming the operation and the missing
  // rank, not when rank 1 comes back; rank 1 then fails too.
  expect_names(errors[0], {"all_gather", "timed out after 0.5 s", "ranks [1] did not arrive"});
  EXPECT_LT(seconds[0], 2.5) << errors[0];
  EXPECT_FALSE(errors[1].empty());
  // The last complete checkpoint is as it was, and no temporary directory is left.
  EXPECT_EQ(snapshot(dir), before);
  EXPECT_EQ(tmp.entries(), std::vector<std::string>{"ck"});
  EXPECT_EQ(error_of([&] { load(dir, 2); }), "");
}

// ---- the command line ----

struct CliRun {
  int status;
  std::string out;
};

CliRun weft_cli(const std::string& args) {
  const fs::path weft = WEFT_CLI_PATH;
  CliRun r{};
  FILE* p = ::popen((weft.string() + " " + args + " 2>&1").c_str(), "r");
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

TEST(IntegrityCli, EvalNamesTheNonFiniteParameterAndCanGoOn) {
  TempDir tmp;
  const std::string dir = tmp.path("ck");
  save(dir, 1, [](nn::Gpt& model, optim::AdamW&) {
    model.parameters().front()->value.data<float>()[0] = std::nanf("");
  });
  const std::string eval = "eval --checkpoint " + dir + " --max-tokens 64 --json";
  CliRun r = weft_cli(eval);
  EXPECT_EQ(r.status, 2) << r.out;
  expect_names(r.out, {"weft: error: ", "model-rank0.safetensors: parameter ",
                       "holds 1 NaN and 0 infinite values", "--allow-nonfinite"});
  EXPECT_EQ(r.out.find("cannot write nan"), std::string::npos) << r.out;
  r = weft_cli(eval + " --allow-nonfinite");
  EXPECT_EQ(r.out.find("no checksums"), std::string::npos) << r.out;
  EXPECT_EQ(r.status, 0) << r.out;
  expect_names(r.out, {"{\"loss\":null,\"tokens\":64,\"perplexity\":null,\"finite\":false}"});
}

TEST(IntegrityCli, EvalAndGenerateNeedNoRankFiles) {
  TempDir tmp;
  const std::string dir = tmp.path("ck");
  save(dir, 2);
  fs::remove(fs::path(dir) / "rank1.json");
  fs::remove(fs::path(dir) / "rank0.json");
  CliRun r = weft_cli("eval --checkpoint " + dir + " --max-tokens 64 --json");
  EXPECT_EQ(r.status, 0) << r.out;
  expect_names(r.out, {"\"tokens\":64", "\"finite\":true"});
  r = weft_cli("generate --checkpoint " + dir + " --prompt Hi --tokens 4");
  EXPECT_EQ(r.status, 0) << r.out;
  // Resuming needs them, and says which.
  expect_names(error_of([&] { load(dir, 2); }), {"cannot read", ".json"});
}

TEST(IntegrityCli, EvalRefusesAFlippedBitWithExitStatus2) {
  TempDir tmp;
  const std::string dir = tmp.path("ck");
  save(dir);
  const fs::path file = fs::path(dir) / "model-rank0.safetensors";
  flip(file, data_byte(file, "wte.weight"));
  const CliRun r = weft_cli("eval --checkpoint " + dir + " --max-tokens 64");
  EXPECT_EQ(r.status, 2) << r.out;
  expect_names(r.out, {"weft: error: ",
                       "model-rank0.safetensors is damaged: tensor wte.weight "
                       "has checksum",
                       "use another checkpoint"});
}

TEST(IntegrityCli, VerifyPrintsOneLinePerFile) {
  TempDir tmp;
  const std::string dir = tmp.path("ck");
  save(dir, 2);
  CliRun r = weft_cli("checkpoint verify " + dir);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 7) << r.out;
  for (const char* f :
       {"index.json", "model-rank0.safetensors", "model-rank1.safetensors",
        "optimizer-rank0.safetensors", "optimizer-rank1.safetensors", "rank0.json", "rank1.json"}) {
    expect_names(r.out, {f});
  }
  EXPECT_EQ(r.out.find("DAMAGED"), std::string::npos) << r.out;
  expect_names(weft_cli("checkpoint inspect " + dir).out, {"checksums: XXH3-64 of every tensor"});

  const fs::path file = fs::path(dir) / "optimizer-rank1.safetensors";
  flip(file, data_byte(file, "h.0.mlp.fc1.weight.exp_avg"));
  r = weft_cli("checkpoint verify " + dir);
  EXPECT_EQ(r.status, 2) << r.out;
  expect_names(r.out, {"DAMAGED  optimizer-rank1.safetensors",
                       "tensor h.0.mlp.fc1.weight.exp_avg has checksum",
                       "ok       model-rank1.safetensors", "weft: error: 1 of 7 checked files of"});

  // A Hugging Face model directory and its file: their structure.
  const std::string hf = tmp.path("hf");
  save(tmp.path("ck2"));
  ASSERT_EQ(weft_cli("checkpoint export " + tmp.path("ck2") + " " + hf).status, 0);
  r = weft_cli("checkpoint verify " + hf + "/model.safetensors");
  EXPECT_EQ(r.status, 0) << r.out;
  expect_names(r.out, {"ok       model.safetensors", "structure ok", "no checksums"});
  r = weft_cli("checkpoint verify " + hf);
  EXPECT_EQ(r.status, 0) << r.out;
  expect_names(r.out, {"model.safetensors", "config.json"});
  // Sharded: the index and every shard.
  ASSERT_EQ(
      weft_cli("checkpoint export " + tmp.path("ck2") + " " + hf + " --max-shard-size 2K").status,
      0);
  r = weft_cli("checkpoint verify " + hf);
  EXPECT_EQ(r.status, 0) << r.out;
  expect_names(
      r.out, {"ok       model.safetensors.index.json", "ok       model-00001-of-", "config.json"});
}

}  // namespace
}  // namespace weft::io
