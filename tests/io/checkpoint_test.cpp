// Checkpoints: resharding between layouts (bitwise), atomic saves, clear
// errors for damaged or mismatched checkpoints, Hugging Face export/import.
//
// Every parameter and moment is set to a fixed function of its name and
// global index, so the expected local slice at any layout is
// shard_of(spec, expected_full(name)).
#include "weft/io/checkpoint.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "contexts.h"
#include "testing.h"
#include "weft/comm/local.h"
#include "weft/core/threads.h"
#include "weft/io/hf_export.h"
#include "weft/train/config.h"

namespace weft::io {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kVocab = 61;
constexpr uint64_t kSeed = 5;

using weft::testing::TempDir;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Every file of a directory and its bytes.
std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out[e.path().filename()] = read_bytes(e.path());
  return out;
}

nn::GptConfig small_config(int64_t width = 16, int64_t layers = 2) {
  nn::GptConfig c;
  c.vocab = kVocab;
  c.seq = 8;
  c.layers = layers;
  c.width = width;
  c.heads = 4;
  return c;
}

// A tensor of `shape` determined by (name, salt); padding rows are zero.
Tensor expected_full(const std::string& name, const Shape& shape, uint32_t salt,
                     int64_t valid_rows = -1) {
  uint32_t h = 2166136261u ^ salt;
  for (char c : name) h = (h ^ static_cast<uint8_t>(c)) * 16777619u;
  Tensor t = weft::testing::random_tensor(shape, h, salt == 2 ? 0.0f : -1.0f, 1.0f);
  if (valid_rows >= 0 && valid_rows < shape[0]) t.narrow(valid_rows, shape[0] - valid_rows).zero();
  return t;
}

Tensor expected_slice(const nn::Parameter& p, uint32_t salt) {
  return nn::shard_of(p.spec, expected_full(p.name, p.spec.global_shape, salt, p.spec.valid_rows));
}

void fill(nn::Gpt& model, optim::AdamW* opt) {
  for (nn::Parameter* p : model.parameters()) p->value.copy_from(expected_slice(*p, 0));
  if (!opt) return;
  for (size_t i = 0; i < opt->parameters().size(); ++i) {
    opt->first_moments()[i].copy_from(expected_slice(*opt->parameters()[i], 1));
    opt->second_moments()[i].copy_from(expected_slice(*opt->parameters()[i], 2));
  }
  opt->set_steps_taken(7);
}

void expect_filled(nn::Gpt& model, optim::AdamW* opt) {
  for (nn::Parameter* p : model.parameters()) {
    EXPECT_EQ(p->value.to_vector(), expected_slice(*p, 0).to_vector()) << p->name;
  }
  if (!opt) return;
  EXPECT_EQ(opt->steps_taken(), 7);
  for (size_t i = 0; i < opt->parameters().size(); ++i) {
    const nn::Parameter& p = *opt->parameters()[i];
    EXPECT_EQ(opt->first_moments()[i].to_vector(), expected_slice(p, 1).to_vector()) << p.name;
    EXPECT_EQ(opt->second_moments()[i].to_vector(), expected_slice(p, 2).to_vector()) << p.name;
  }
}

// Saved random streams: default at offset 100 on every rank, model-parallel
// at 1000 + world rank.
parallel::RngTracker::State saved_rng(int world_rank, int tp_rank) {
  parallel::RngTracker rng(kSeed, tp_rank);
  rng.take(100);
  auto fork = rng.fork();
  rng.take(1000 + static_cast<uint64_t>(world_rank));
  return rng.state();
}

// Saves the filled model at world `world_size`, TP `tp`.
void save_at(const std::string& dir, int world_size, int tp, nn::GptConfig base = small_config()) {
  comm::run_local(world_size, [&](comm::ProcessGroup& world) {
    set_num_threads(1);
    comm::Grid grid(world, "tp-dp", {{"tp", tp}});
    nn::GptConfig cfg = base;
    nn::Gpt model(ctx_of(grid.group_ptr("tp"), parallel::SequenceParallel::off, DType::f32, kSeed),
                  cfg);
    optim::AdamW opt(model.parameters(), {});
    fill(model, &opt);
    io::TrainState state;
    state.step = 7;
    state.data_seed = 99;
    state.rng = saved_rng(world.rank(), grid.rank_in("tp"));
    state.config = io::model_shape_json(base);
    state.config["lr"] = 0.5;
    io::save_checkpoint(dir, world, grid, model, &opt, state);
  });
}

// Loads at world `world_size`, TP `tp`; checks every slice and returns each rank's state.
std::vector<io::TrainState> load_at(const std::string& dir, int world_size, int tp,
                                    const nn::GptConfig& cfg = small_config()) {
  std::vector<io::TrainState> states(static_cast<size_t>(world_size));
  comm::run_local(world_size, [&](comm::ProcessGroup& world) {
    set_num_threads(1);
    comm::Grid grid(world, "tp-dp", {{"tp", tp}});
    nn::Gpt model(ctx_of(grid.group_ptr("tp"), parallel::SequenceParallel::off, DType::f32, kSeed),
                  cfg);
    optim::AdamW opt(model.parameters(), {});
    states[static_cast<size_t>(world.rank())] = io::load_checkpoint(dir, world, grid, model, &opt);
    expect_filled(model, &opt);
  });
  return states;
}

using weft::testing::error_of;

TEST(Checkpoint, SavedAtTp2LoadsBitwiseAtTp1AndTp4) {
  TempDir tmp;
  const std::string dir = tmp.path("ckpt");
  save_at(dir, 2, 2);
  EXPECT_EQ(tmp.entries(), std::vector<std::string>{"ckpt"});

  for (int tp : {1, 4}) {
    SCOPED_TRACE(tp);
    std::vector<io::TrainState> states = load_at(dir, tp, tp);
    for (int r = 0; r < tp; ++r) {
      const io::TrainState& s = states[static_cast<size_t>(r)];
      EXPECT_EQ(s.step, 7);
      EXPECT_EQ(s.data_seed, 99u);
      EXPECT_EQ(s.config.at("lr").as_double(), 0.5);
      // Another layout: rank 0's default stream, the model-parallel stream
      // re-seeded for this TP rank past every saved offset.
      EXPECT_EQ(s.rng.at(parallel::kDefaultStream), (parallel::RngTracker::Stream{kSeed, 100}));
      EXPECT_EQ(s.rng.at(parallel::kModelParallelStream),
                (parallel::RngTracker::Stream{kSeed + 2718 + static_cast<uint64_t>(r), 1001}));
    }
  }
}

// A MoE model: per-expert weights and the routers reshard like the rest, and
// the model shape carries the MoE fields (a dense shape carries none).
TEST(Checkpoint, MoeModelSavedAtTp2LoadsBitwiseAtTp1AndTp4) {
  nn::GptConfig moe = small_config(16, 3);
  moe.moe_experts = 4;
  moe.moe_top_k = 1;
  moe.moe_every = 2;
  moe.moe_capacity_factor = 1.5f;
  moe.moe_z_coef = 0.001f;
  TempDir tmp;
  const std::string dir = tmp.path("ckpt");
  save_at(dir, 2, 2, moe);
  for (int tp : {1, 4}) load_at(dir, tp, tp, moe);

  const Json shape = io::model_shape_json(moe);
  const nn::GptConfig back = io::apply_model_shape(small_config(), shape);
  EXPECT_EQ(io::model_shape_json(back).dump(), shape.dump());
  EXPECT_EQ(back.moe_capacity_factor, 1.5f);
  EXPECT_EQ(io::model_shape_json(small_config()).find("moe_experts"), nullptr);
  EXPECT_NE(error_of([&] { load_at(dir, 1, 1); }), "");
}

TEST(Checkpoint, SameLayoutRestoresEachRanksStreams) {
  TempDir tmp;
  const std::string dir = tmp.path("ckpt");
  save_at(dir, 2, 2);
  std::vector<io::TrainState> states = load_at(dir, 2, 2);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(states[static_cast<size_t>(r)].rng, saved_rng(r, r));
}

TEST(Checkpoint, Tp2Dp2WritesEachSliceOnceAndLoadsAtTp1) {
  TempDir tmp;
  const std::string dir = tmp.path("ckpt");
  save_at(dir, 4, 2);
  // DP replicas (ranks 2, 3) write no tensors, only their streams.
  for (const char* f : {"index.json", "model-rank0.safetensors", "model-rank1.safetensors",
                        "optimizer-rank0.safetensors", "optimizer-rank1.safetensors", "rank0.json",
                        "rank1.json", "rank2.json", "rank3.json"}) {
    EXPECT_TRUE(fs::exists(dir + "/" + f)) << f;
  }
  EXPECT_FALSE(fs::exists(dir + "/model-rank2.safetensors"));
  EXPECT_FALSE(fs::exists(dir + "/optimizer-rank3.safetensors"));

  io::CheckpointReader ck(dir);
  EXPECT_EQ(ck.world(), 4);
  EXPECT_EQ(ck.order(), "tp-dp");
  EXPECT_EQ(ck.sizes(), (std::vector<std::pair<std::string, int>>{{"tp", 2}, {"dp", 2}}));
  const io::SavedTensor* qkv = ck.find("h.0.attn.qkv.weight");
  ASSERT_NE(qkv, nullptr);
  EXPECT_EQ(qkv->global_shape, (Shape{48, 16}));
  EXPECT_EQ(qkv->split_dim, 0);
  EXPECT_EQ(qkv->blocks, 3);
  ASSERT_EQ(qkv->shards.size(), 2u);
  EXPECT_EQ(qkv->shards[1].file, "model-rank1.safetensors");
  EXPECT_EQ(qkv->shards[1].offset, 8);  // of each 16-row block (q, k, v)
  EXPECT_EQ(qkv->shards[1].length, 8);
  const io::SavedTensor* ln = ck.find("h.1.ln_2.weight");  // replicated over TP: written once
  ASSERT_NE(ln, nullptr);
  ASSERT_EQ(ln->shards.size(), 1u);
  EXPECT_EQ(ln->shards[0].file, "model-rank0.safetensors");
  EXPECT_EQ(ck.find("wte.weight")->valid_rows, kVocab);
  EXPECT_NE(ck.find_optimizer("h.0.mlp.fc2.weight.exp_avg_sq"), nullptr);

  load_at(dir, 1, 1);
}

TEST(Checkpoint, FailedSaveKeepsTheOldCheckpointAndLeavesNoTempDir) {
  TempDir tmp;
  const std::string dir = tmp.path("ckpt");
  save_at(dir, 1, 1);
  const auto before = snapshot(dir);

  // Disk full on every rank (writes past RLIMIT_FSIZE fail with EFBIG).
  std::string message;
  {
    rlimit saved{};
    getrlimit(RLIMIT_FSIZE, &saved);
    sighandler_t old_handler = signal(SIGXFSZ, SIG_IGN);
    rlimit lim = saved;
    lim.rlim_cur = 4096;
    setrlimit(RLIMIT_FSIZE, &lim);
    message = error_of([&] { save_at(dir, 2, 2, small_config()); });
    setrlimit(RLIMIT_FSIZE, &saved);
    signal(SIGXFSZ, old_handler);
  }
  EXPECT_NE(message.find("model-rank"), std::string::npos) << message;
  EXPECT_EQ(snapshot(dir), before);
  EXPECT_EQ(tmp.entries(), std::vector<std::string>{"ckpt"});
  load_at(dir, 1, 1);

  // A later save replaces the checkpoint whole.
  save_at(dir, 2, 2);
  EXPECT_EQ(io::CheckpointReader(dir).world(), 2);
  EXPECT_EQ(tmp.entries(), std::vector<std::string>{"ckpt"});
}

TEST(Checkpoint, RefusesToReplaceADirectoryThatIsNotACheckpoint) {
  TempDir tmp;
  const std::string dir = tmp.path("data");
  fs::create_directory(dir);
  std::ofstream(dir + "/notes.txt") << "keep me";
  const std::string message = error_of([&] { save_at(dir, 1, 1); });
  EXPECT_NE(message.find("not a weft checkpoint"), std::string::npos) << message;
  EXPECT_EQ(read_bytes(dir + "/notes.txt"), "keep me");
  EXPECT_EQ(tmp.entries(), std::vector<std::string>{"data"});
}

TEST(Checkpoint, TruncatedOrCorruptedFilesAreNamed) {
  TempDir tmp;
  const std::string dir = tmp.path("ckpt");
  save_at(dir, 2, 2);
  const std::string model1 = dir + "/model-rank1.safetensors";
  fs::resize_file(model1, fs::file_size(model1) / 2);
  for (int tp : {1, 2}) {
    // Every rank fails, also those that read nothing from the damaged file.
    const std::string message = error_of([&] { load_at(dir, tp, tp); });
    EXPECT_NE(message.find("model-rank1.safetensors"), std::string::npos) << message;
    EXPECT_NE(message.find("truncated"), std::string::npos) << message;
  }

  std::ofstream(dir + "/index.json", std::ios::app) << "}";
  std::string message = error_of([&] { load_at(dir, 1, 1); });
  EXPECT_NE(message.find("index.json"), std::string::npos) << message;

  fs::remove(dir + "/index.json");
  message = error_of([&] { load_at(dir, 1, 1); });
  EXPECT_NE(message.find("no index.json"), std::string::npos) << message;
}

TEST(Checkpoint, AnotherModelShapeNamesTheField) {
  TempDir tmp;
  const std::string dir = tmp.path("ckpt");
  save_at(dir, 1, 1, small_config(32));
  std::string message = error_of([&] { load_at(dir, 1, 1); });
  EXPECT_NE(message.find("width 32"), std::string::npos) << message;
  EXPECT_NE(message.find("width 16"), std::string::npos) << message;

  save_at(dir, 1, 1, small_config(16, 3));
  message = error_of([&] { load_at(dir, 1, 1); });
  EXPECT_NE(message.find("layers 3"), std::string::npos) << message;
}

TEST(Checkpoint, ReadConfigGivesTheRunConfigAndModelShape) {
  TempDir tmp;
  const std::string dir = tmp.path("ckpt");
  save_at(dir, 2, 2);
  const io::Json config = train::read_checkpoint_config(dir);
  EXPECT_EQ(config.at("lr").as_double(), 0.5);
  const nn::GptConfig cfg = io::apply_model_shape(nn::GptConfig{}, config);
  EXPECT_EQ(cfg.vocab, kVocab);
  EXPECT_EQ(cfg.width, 16);
  EXPECT_EQ(cfg.layers, 2);
  EXPECT_EQ(cfg.heads, 4);
  EXPECT_EQ(cfg.seq, 8);
  EXPECT_NE(
      error_of([&] { train::read_checkpoint_config(tmp.path("absent")); }).find("does not exist"),
      std::string::npos);
}

TEST(Checkpoint, HfExportHasGpt2NamesAndLayouts) {
  TempDir tmp;
  const std::string dir = tmp.path("ckpt"), file = tmp.path("hf/model.safetensors");
  save_at(dir, 2, 2);
  io::export_hf(dir, tmp.path("hf"));

  io::SafetensorsFile f(file);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const io::TensorInfo& t : f.tensors()) {
    EXPECT_EQ(t.dtype, "F32");
    shapes[t.name] = t.shape;
  }
  std::map<std::string, std::vector<int64_t>> expect = {
      {"transformer.wte.weight", {kVocab, 16}},
      {"transformer.wpe.weight", {8, 16}},
      {"transformer.ln_f.weight", {16}},
      {"transformer.ln_f.bias", {16}},
  };
  for (int l = 0; l < 2; ++l) {
    const std::string h = "transformer.h." + std::to_string(l) + ".";
    for (const char* ln : {"ln_1", "ln_2"}) {
      expect[h + ln + ".weight"] = {16};
      expect[h + ln + ".bias"] = {16};
    }
    expect[h + "attn.c_attn.weight"] = {16, 48};
    expect[h + "attn.c_attn.bias"] = {48};
    expect[h + "attn.c_proj.weight"] = {16, 16};
    expect[h + "attn.c_proj.bias"] = {16};
    expect[h + "mlp.c_fc.weight"] = {16, 64};
    expect[h + "mlp.c_fc.bias"] = {64};
    expect[h + "mlp.c_proj.weight"] = {64, 16};
    expect[h + "mlp.c_proj.bias"] = {16};
  }
  EXPECT_EQ(shapes, expect);

  // Conv1D weights are the transpose of ours: c_attn[i][j] = qkv[j][i].
  const Tensor qkv = expected_full("h.1.attn.qkv.weight", {48, 16}, 0);
  const Tensor c_attn = f.load("transformer.h.1.attn.c_attn.weight");
  for (int64_t i = 0; i < 16; ++i) {
    for (int64_t j = 0; j < 48; ++j) ASSERT_EQ(c_attn.item(i * 48 + j), qkv.item(j * 16 + i));
  }
  EXPECT_EQ(f.load("transformer.wte.weight").to_vector(),
            expected_full("wte.weight", {128, 16}, 0, kVocab).narrow(0, kVocab).to_vector());

  const io::Json config = io::parse_json(read_bytes(tmp.path("hf/config.json")));
  EXPECT_EQ(config.at("n_embd").as_int(), 16);
  EXPECT_EQ(config.at("n_layer").as_int(), 2);
  EXPECT_EQ(config.at("n_head").as_int(), 4);
  EXPECT_EQ(config.at("n_positions").as_int(), 8);
  EXPECT_EQ(config.at("vocab_size").as_int(), kVocab);
  EXPECT_EQ(config.at("activation_function").as_string(), "gelu_new");
  EXPECT_EQ(config.at("layer_norm_epsilon").as_double(), 1e-5);
}

TEST(Checkpoint, HfExportLoadsBackAtAnyLayout) {
  TempDir tmp;
  const std::string dir = tmp.path("ckpt"), file = tmp.path("model.safetensors");
  save_at(dir, 2, 2);
  io::export_hf(dir, file);
  EXPECT_EQ(io::hf_config(file), io::model_shape_json(small_config()));
  for (int tp : {1, 4}) {
    comm::run_local(tp, [&](comm::ProcessGroup& world) {
      set_num_threads(1);
      comm::Grid grid(world, "tp-dp", {{"tp", tp}});
      nn::GptConfig cfg = small_config();
      nn::Gpt model(
          ctx_of(grid.group_ptr("tp"), parallel::SequenceParallel::off, DType::f32, kSeed), cfg);
      io::load_hf(file, model);
      expect_filled(model, nullptr);
    });
  }
  // Another shape: the field is named.
  nn::Gpt wide(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, kSeed),
               small_config(32));
  const std::string message = error_of([&] { io::load_hf(file, wide); });
  EXPECT_NE(message.find("width 16"), std::string::npos) << message;
}

TEST(Checkpoint, HfFilesWithoutPrefixOrConfigLoad) {
  // As the original gpt2 upload: no "transformer." prefix, attention-mask
  // buffers, no config.json; width 64 gives one 64-wide head.
  TempDir tmp;
  nn::GptConfig cfg = small_config(64, 1);
  cfg.heads = 1;
  nn::Gpt source(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, kSeed), cfg);
  std::vector<io::NamedTensor> tensors;
  for (nn::Parameter* p : source.parameters()) {
    Tensor t = p->value;
    if (p->name == "wte.weight") t = t.narrow(0, kVocab);
    std::string name = io::hf_name(p->name).substr(std::string("transformer.").size());
    if (io::hf_transposed(p->name)) {
      Tensor tr = Tensor::empty({t.size(1), t.size(0)});
      for (int64_t i = 0; i < t.size(0); ++i) {
        for (int64_t j = 0; j < t.size(1); ++j) {
          tr.data<float>()[j * t.size(0) + i] = t.data<float>()[i * t.size(1) + j];
        }
      }
      t = tr;
    }
    tensors.push_back({name, t});
  }
  tensors.push_back({"h.0.attn.bias", Tensor::zeros({1, 1, 8, 8})});
  tensors.push_back({"lm_head.weight", source.parameters()[0]->value.narrow(0, kVocab)});
  const std::string file = tmp.path("gpt2.safetensors");
  io::write_safetensors(file, tensors);
  EXPECT_EQ(io::hf_config(file).at("heads").as_int(), 1);

  nn::GptConfig other = cfg;
  nn::Gpt loaded(ctx_of(nullptr, parallel::SequenceParallel::off, DType::f32, kSeed + 1), other);
  io::load_hf(file, loaded);
  for (size_t i = 0; i < source.parameters().size(); ++i) {
    EXPECT_EQ(loaded.parameters()[i]->value.to_vector(), source.parameters()[i]->value.to_vector())
        << source.parameters()[i]->name;
  }
}

TEST(Checkpoint, ImportedFileResumesAtTp2WithAFreshOptimizer) {
  TempDir tmp;
  const std::string dir = tmp.path("ckpt"), file = tmp.path("model.safetensors");
  save_at(dir, 1, 1);
  io::export_hf(dir, file);
  const std::string imported = tmp.path("imported");
  io::import_hf(file, imported, 11);
  EXPECT_FALSE(io::CheckpointReader(imported).has_optimizer());
  comm::run_local(2, [&](comm::ProcessGroup& world) {
    set_num_threads(1);
    comm::Grid grid(world, "tp-dp", {{"tp", 2}});
    nn::GptConfig cfg = small_config();
    nn::Gpt model(ctx_of(grid.group_ptr("tp"), parallel::SequenceParallel::off, DType::f32, kSeed),
                  cfg);
    optim::AdamW opt(model.parameters(), {});
    fill(model, &opt);
    const io::TrainState s = io::load_checkpoint(imported, world, grid, model, &opt);
    EXPECT_EQ(s.step, 0);
    EXPECT_EQ(opt.steps_taken(), 0);
    EXPECT_EQ(s.rng.at(parallel::kDefaultStream), (parallel::RngTracker::Stream{11, 0}));
    for (nn::Parameter* p : model.parameters()) {
      EXPECT_EQ(p->value.to_vector(), expected_slice(*p, 0).to_vector()) << p->name;
    }
    for (const Tensor& m : opt.first_moments()) {
      for (float x : m.to_vector()) ASSERT_EQ(x, 0.0f);
    }
  });
}

// `weft checkpoint inspect` on a checkpoint and on an exported file. The CLI
// is a dependency of this binary and its path a compile definition
// (tests/CMakeLists.txt): a missing binary fails the test.
#ifndef WEFT_CLI_PATH
#error "WEFT_CLI_PATH (the weft_cli binary) is set by tests/CMakeLists.txt"
#endif
TEST(Checkpoint, InspectListsLayoutAndShards) {
  const fs::path weft = WEFT_CLI_PATH;
  ASSERT_TRUE(fs::is_regular_file(weft)) << "no " << weft << " (the weft_cli target)";
  TempDir tmp;
  const std::string dir = tmp.path("ckpt"), file = tmp.path("model.safetensors");
  save_at(dir, 4, 2);
  io::export_hf(dir, file);
  auto run = [&](const std::string& args) {
    std::string out;
    FILE* p = ::popen((weft.string() + " checkpoint inspect " + args + " 2>&1").c_str(), "r");
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    EXPECT_EQ(::pclose(p), 0) << out;
    return out;
  };
  const std::string text = run(dir);
  for (const char* s :
       {"step 7", "world 4, order tp-dp, tp 2, dp 2", "width 16", "h.0.attn.qkv.weight", "[48, 16]",
        "dim 0 x3", "model-rank0[0,8) model-rank1[8,16)", "rows < 61 valid"}) {
    EXPECT_NE(text.find(s), std::string::npos) << s << "\n" << text;
  }
  const io::Json j = io::parse_json(run(dir + " --json"));
  EXPECT_EQ(j.at("layout").at("tp").as_int(), 2);
  const std::string hf = run(file);
  EXPECT_NE(hf.find("transformer.h.1.attn.c_attn.weight  F32   [16, 48]"), std::string::npos) << hf;
  EXPECT_NE(hf.find("heads 4"), std::string::npos) << hf;
}

}  // namespace
}  // namespace weft::io
