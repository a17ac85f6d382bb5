// Grouped-query attention with more TP ranks than key/value heads: each KV
// head replicated on TP/kv_heads ranks (nn/attention.h). Training equals the
// single-rank run, the replicas stay bitwise identical, checkpoints save the
// shared slices once and reshard bitwise between TP 4, 1 and 2, the Hugging
// Face export holds the right k and v weights, and the layouts that cannot
// work are refused naming the options.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "testing.h"
#include "trainer_harness.h"
#include "weft/comm/local.h"
#include "weft/core/threads.h"
#include "weft/io/checkpoint.h"
#include "weft/io/hf_export.h"
#include "weft/io/hf_files.h"
#include "weft/io/safetensors.h"
#include "weft/train/trainer.h"

namespace weft::train {
namespace {

// tiny_config's size as a Llama: 4 query heads over `kv_heads` KV heads.
TrainConfig llama_config(int64_t kv_heads) {
  TrainConfig c = tiny_config();
  c.model.kv_heads = kv_heads;
  c.model.hidden = 48;
  c.model.norm = nn::NormKind::rms;
  c.model.mlp = nn::MlpKind::swiglu;
  c.model.positions = nn::PositionKind::rotary;
  c.model.bias = false;
  c.model.tied_head = false;
  return c;
}

class KvReplication : public ::testing::Test {
 protected:
  KvReplication() : data_(test_text(), 16) {}
  io::Dataset data_;
};

TEST_F(KvReplication, TrainingEqualsOneRank) {
  const std::pair<int, int64_t> layouts[] = {{4, 2}, {2, 1}};  // TP, KV heads
  for (const auto& [tp, kv] : layouts) {
    const TrainConfig one = llama_config(kv);
    const RunResult reference = run(one, data_, 1);
    for (nn::SequenceParallel sp :
         {nn::SequenceParallel::off, nn::SequenceParallel::seq, nn::SequenceParallel::batch}) {
      SCOPED_TRACE(format("tp {} kv_heads {} sp {}", tp, kv, nn::sequence_parallel_name(sp)));
      TrainConfig c = one;
      c.tp = tp;
      c.sp = sp;
      expect_close(reference, run(c, data_, 1), one.lr_value());
      if (sp != nn::SequenceParallel::seq) continue;
      // Comm-GEMM overlap (ring exchange) over the qkv GEMM's shared rows.
      c.overlap = "on";
      expect_close(reference, run(c, data_, 1), one.lr_value());
    }
  }
}

// Data parallelism beside the share groups: gradients averaged over dp,
// then the k and v rows summed over their share group.
TEST_F(KvReplication, WithDataParallelismEqualsOneRank) {
  TrainConfig one = llama_config(1);
  one.micro_batch = 8;
  TrainConfig grid = llama_config(1);
  grid.tp = 2;
  grid.micro_batch = 4;
  grid.bucket_mb = 0.01;  // several buckets, issued during backward
  expect_close(run(one, data_, 1), run(grid, data_, 2), one.lr_value());
}

// Every rank of a share group holds the same k and v rows, and after
// training they still agree to the bit: their gradients are summed into
// the same values on each, and AdamW moves them the same way.
TEST_F(KvReplication, ReplicasStayBitwiseIdentical) {
  TrainConfig c = llama_config(1);
  c.tp = 4;
  c.model.dropout = 0.1f;
  comm::run_local(4, [&](comm::ProcessGroup& world) {
    set_num_threads(1);
    Trainer t(c, world, data_);
    for (int i = 0; i < 3; ++i) t.step();
    int shared = 0;
    for (nn::Parameter* p : t.model().parameters()) {
      if (!p->spec.is_shared()) continue;
      ++shared;
      ASSERT_NE(p->share_group, nullptr) << p->name;
      EXPECT_EQ(p->share_group->size(), 4) << p->name;
      const Tensor mine = nn::common_rows(p->spec, p->value);
      Shape all = mine.shape();
      all[0] *= 4;
      Tensor gathered = Tensor::empty(all, DType::f32);
      p->share_group->all_gather(gathered, mine).wait();
      const std::vector<float> first = gathered.narrow(0, mine.size(0)).to_vector();
      for (int r = 1; r < 4; ++r) {
        EXPECT_EQ(gathered.narrow(r * mine.size(0), mine.size(0)).to_vector(), first)
            << p->name << " on rank " << r;
      }
    }
    EXPECT_EQ(shared, c.model.layers);  // each layer's qkv weight
  });
}

// Every tensor of `a` (parameters, and optimizer moments unless
// `weights_only`) equals b's to the bit.
void expect_same_tensors(const std::string& a, const std::string& b, bool weights_only = false) {
  io::CheckpointReader ca(a), cb(b);
  ASSERT_EQ(ca.tensors().size(), cb.tensors().size());
  for (const auto* list : {&ca.tensors(), &ca.optimizer_tensors()}) {
    if (weights_only && list == &ca.optimizer_tensors()) continue;
    for (const io::SavedTensor& t : *list) {
      const io::SavedTensor* u =
          list == &ca.tensors() ? cb.find(t.name) : cb.find_optimizer(t.name);
      ASSERT_NE(u, nullptr) << t.name << " in " << b;
      EXPECT_EQ(ca.read_full(t).to_vector(), cb.read_full(*u).to_vector()) << t.name << " in " << b;
    }
  }
}

// The files of checkpoint `dir` that hold tensor `name`.
int files_holding(const std::string& dir, const std::string& name) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string file = e.path().filename().string();
    if (!file.ends_with(".safetensors")) continue;
    const io::SafetensorsFile f(e.path().string());
    for (const io::TensorInfo& t : f.tensors()) {
      n += t.name == name;
    }
  }
  return n;
}

// Saved at TP 4 with 2 KV heads, resumed and saved at TP 1, then TP 2, then
// TP 4 again: every checkpoint holds the same bytes, and the run resumed at
// TP 1 takes the step the TP 4 run takes.
TEST_F(KvReplication, CheckpointsReshardBitwise) {
  const weft::testing::TempDir tmp;
  TrainConfig c = llama_config(2);
  c.steps = 8;
  const std::string first = tmp.path("tp4");
  double next_at_tp4 = 0;
  c.tp = 4;
  comm::run_local(4, [&](comm::ProcessGroup& world) {
    set_num_threads(1);
    Trainer t(c, world, data_);
    for (int i = 0; i < 3; ++i) t.step();
    t.save(first);
    const double next = t.step().loss;
    if (world.rank() == 0) next_at_tp4 = next;
  });
  // The k and v rows go once: by shared rank 0 of each of the 2 KV heads.
  EXPECT_EQ(files_holding(first, "h.0.attn.qkv.weight"), 2);
  EXPECT_EQ(files_holding(first, "h.0.attn.qkv.weight.exp_avg"), 2);
  std::string previous = first;
  for (int tp : {1, 2, 4}) {
    SCOPED_TRACE(format("resharded to tp {}", tp));
    TrainConfig resumed = c;
    resumed.tp = tp;
    resumed.resume = previous;
    const std::string dir = tmp.path(format("from-tp{}", tp));
    double next = 0;
    comm::run_local(tp, [&](comm::ProcessGroup& world) {
      set_num_threads(1);
      Trainer t(resumed, world, data_);
      EXPECT_EQ(t.steps_done(), 3);
      t.save(dir);
      const double loss = t.step().loss;
      if (world.rank() == 0) next = loss;
    });
    expect_same_tensors(first, dir);
    EXPECT_NEAR(next, next_at_tp4, 1e-5 * std::abs(next_at_tp4));
    previous = dir;
  }
}

// The Hugging Face export of a TP 4 checkpoint (2 KV heads) holds k_proj and
// v_proj as the k and v blocks of the full qkv weight, and equals the export
// of the same weights saved at TP 1; a TP 4 run started from it (--init)
// holds the weights it was exported from.
TEST_F(KvReplication, HuggingFaceExportHoldsTheKeyValueWeights) {
  const weft::testing::TempDir tmp;
  TrainConfig c = llama_config(2);
  c.steps = 8;
  for (int tp : {4, 1}) {
    TrainConfig at = c;
    at.tp = tp;
    if (tp == 1) at.resume = tmp.path("tp4");
    comm::run_local(tp, [&](comm::ProcessGroup& world) {
      set_num_threads(1);
      Trainer t(at, world, data_);
      if (tp == 4) t.step();
      t.save(tmp.path(format("tp{}", tp)));
    });
    io::export_hf(tmp.path(format("tp{}", tp)), tmp.path(format("hf{}", tp)));
  }
  const io::HfModelFiles four(tmp.path("hf4")), one(tmp.path("hf1"));
  const io::CheckpointReader ck(tmp.path("tp4"));
  const int64_t d = c.model.width / c.model.heads, kv_rows = 2 * d;
  const int64_t q_rows = c.model.heads * d;
  for (int64_t layer = 0; layer < c.model.layers; ++layer) {
    const Tensor qkv = ck.read_full(*ck.find(format("h.{}.attn.qkv.weight", layer)));
    const std::string at = format("model.layers.{}.self_attn.", layer);
    EXPECT_EQ(four.load(at + "k_proj.weight").to(DType::f32).to_vector(),
              qkv.narrow(q_rows, kv_rows).to_vector());
    EXPECT_EQ(four.load(at + "v_proj.weight").to(DType::f32).to_vector(),
              qkv.narrow(q_rows + kv_rows, kv_rows).to_vector());
    for (const char* proj : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
      EXPECT_EQ(four.load(at + proj + ".weight").to_vector(),
                one.load(at + proj + ".weight").to_vector())
          << at << proj;
    }
  }
  TrainConfig from_hf = c;
  from_hf.tp = 4;
  from_hf.init = tmp.path("hf4");
  comm::run_local(4, [&](comm::ProcessGroup& world) {
    set_num_threads(1);
    Trainer(from_hf, world, data_).save(tmp.path("from-hf"));
  });
  expect_same_tensors(tmp.path("tp4"), tmp.path("from-hf"), true);
}

std::string validation_error(const TrainConfig& c) {
  try {
    validate(c);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST_F(KvReplication, LayoutsThatCannotReplicateAreRefusedByName) {
  TrainConfig c = llama_config(2);
  c.model.heads = 6;
  c.model.width = 36;
  c.model.vocab_pad = 3;
  c.tp = 3;  // neither a multiple of 2 KV heads nor dividing them
  std::string err = validation_error(c);
  EXPECT_TRUE(contains(err, "--kv-heads 2 does not fit --tp 3")) << err;
  EXPECT_TRUE(contains(err, "choose such a --tp or --kv-heads")) << err;
  c = llama_config(2);
  c.tp = 4;
  c.gtp = 2;
  err = validation_error(c);
  EXPECT_TRUE(contains(err, "--kv-heads 2 below --tp 4")) << err;
  EXPECT_TRUE(contains(err, "use --gtp 1, or --kv-heads a multiple of --tp")) << err;
  c.gtp = 1;
  EXPECT_EQ(validation_error(c), "no error");
}

}  // namespace
}  // namespace weft::train
