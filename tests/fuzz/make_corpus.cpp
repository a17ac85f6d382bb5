// Writes the seed corpus of every fuzz target into DIR/<target>/ (run by
// `make fuzz-corpus` with DIR = tests/fuzz/corpus): small valid inputs, most
// taken from real files weft writes (the tiny checkpoint of fixtures.h, its
// Hugging Face export, a token shard, a settings file).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fixtures.h"
#include "fuzz.h"
#include "weft/io/data.h"
#include "weft/io/safetensors.h"

namespace {

namespace fs = std::filesystem;
namespace wt = weft::train;
using weft::fuzz::write_file;

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string args(const std::vector<std::string>& list) {
  std::string out;
  for (size_t i = 0; i < list.size(); ++i) out += (i ? std::string(1, '\0') : "") + list[i];
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_make_corpus DIR\n");
    return 2;
  }
  weft::set_num_threads(1);
  const std::string out = argv[1];
  const std::string tmp = weft::fuzz::scratch_dir();
  auto put = [&](const std::string& target, const std::string& name, const std::string& bytes) {
    fs::create_directories(out + "/" + target);
    write_file(out + "/" + target + "/" + name, bytes);
  };

  const std::string ck = tmp + "/ckpt", hf = tmp + "/hf";
  weft::fuzz::save_tiny_checkpoint(ck);
  weft::fuzz::save_tiny_hf(ck, hf);
  const std::string index = read(ck + "/index.json"), rank0 = read(ck + "/rank0.json"),
                    rank1 = read(ck + "/rank1.json"), config = read(hf + "/model/config.json"),
                    hf_index = read(hf + "/model/model.safetensors.index.json");

  // json
  put("json", "index.json", index);
  put("json", "rank0.json", rank0);
  put("json", "config.json", config);
  put("json", "model.safetensors.index.json", hf_index);
  put("json", "scalars.json",
      R"([null, true, false, 0, -0, 12345678901234567890, -9223372036854775808, 1.5e-300,)"
      R"( -2.25E+10, 0.1, "", "tab\t quote\" slash\\ \/ \u00e9 \ud83d\ude00 \u0000"])");
  put("json", "nested.json", R"({"a": {"b": [[], {}, [1, [2, [3]]]], "c": "\u20ac"}, "d": {}})");

  // safetensors
  put("safetensors", "hf-model.safetensors", read(hf + "/file/model.safetensors"));
  put("safetensors", "model-rank0.safetensors", read(ck + "/model-rank0.safetensors"));
  {
    const std::string path = tmp + "/small.safetensors";
    std::vector<weft::io::NamedTensor> tensors;
    tensors.push_back({"f32", weft::Tensor::from({2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6})});
    tensors.push_back({"bf16", weft::Tensor::zeros({3, 1, 2}, weft::DType::bf16)});
    tensors.push_back({"u8", weft::Tensor::zeros({5}, weft::DType::u8)});
    tensors.push_back({"fp4", weft::Tensor::zeros({2, 4}, weft::DType::e2m1)});
    tensors.push_back({"scalar", weft::Tensor::zeros({}, weft::DType::f32)});
    tensors.push_back({"empty", weft::Tensor::zeros({0, 5}, weft::DType::f32)});
    weft::io::write_safetensors(path, tensors, {{"format", "pt"}, {"note", "seed"}});
    put("safetensors", "small.safetensors", read(path));
  }

  // checkpoint: index.json, rank0.json, rank1.json separated by NUL bytes
  put("checkpoint", "tp2", index + '\0' + rank0 + '\0' + rank1);
  put("checkpoint", "index-only", index);

  // hf_config: config.json, then NUL and model.safetensors.index.json
  put("hf_config", "config.json", config);
  put("hf_config", "config-and-index", config + '\0' + hf_index);
  put("hf_config", "minimal.json", R"({"n_head": 2})");
  {
    // A Llama's config.json (grouped-query heads, rotary positions, SwiGLU).
    const std::string llama_ck = tmp + "/llama-ckpt", llama_hf = tmp + "/llama-hf";
    weft::fuzz::save_tiny_checkpoint(llama_ck, weft::fuzz::tiny_llama_config());
    weft::fuzz::save_tiny_hf(llama_ck, llama_hf);
    const std::string llama_config = read(llama_hf + "/model/config.json");
    put("hf_config", "llama-config.json", llama_config);
    put("hf_config", "llama-config-and-index",
        llama_config + '\0' + read(llama_hf + "/model/model.safetensors.index.json"));
  }
  put("hf_config", "shape.json",
      R"({"vocab_size": 20, "n_positions": 8, "n_layer": 1, "n_embd": 8, "n_head": 4,)"
      R"( "n_inner": 32})");

  // llmc_shard
  {
    const std::string path = tmp + "/tokens.bin";
    std::vector<uint16_t> tokens;
    for (uint16_t i = 0; i < 40; ++i) tokens.push_back(static_cast<uint16_t>(i * 1637 % 50257));
    weft::io::write_token_shard(path, tokens);
    put("llmc_shard", "40-tokens.bin", read(path));
    weft::io::write_token_shard(path, std::vector<uint16_t>(10, 7));
    put("llmc_shard", "10-tokens.bin", read(path));
    // llama-3 (llm.c's second format): magic 20240801, version 7, uint32 tokens
    std::vector<int32_t> wide(256 + 12, 0);
    wide[0] = weft::io::kShardMagicU32;
    wide[1] = weft::io::kShardVersionU32;
    wide[2] = 12;
    for (int i = 0; i < 12; ++i) wide[256 + static_cast<size_t>(i)] = 128000 + i * 17;
    put("llmc_shard", "12-tokens-llama3.bin",
        std::string(reinterpret_cast<const char*>(wide.data()), wide.size() * 4));
  }

  // data: mode, seq (2 bytes), val fraction, batch (2), dp rank (2), dp size (2),
  // sub rank (2), sub size (2), step (2), then the --data list, a.txt and b.txt
  // separated by NUL bytes
  const std::string text =
      "The quick brown fox jumps over the lazy dog.\nPack my box with five dozen liquor jugs.\n";
  // Each two-byte size is stored as its value minus the lowest it can take.
  auto data_seed = [&](char mode, char seq, char dp_rank, char dp_size, const std::string& rest) {
    const char head[16] = {mode,
                           static_cast<char>(seq - 1),
                           0,
                           0x20,
                           4 - 1,
                           0,
                           dp_rank,
                           0,
                           static_cast<char>(dp_size - 1),
                           0,
                           0,
                           0,
                           1 - 1,
                           0,
                           5,
                           0};
    return std::string(head, 16) + rest;
  };
  put("data", "list",
      data_seed(0, 7, 0, 1, "a.txt,b.txt" + std::string(1, '\0') + text + '\0' + text));
  put("data", "glob", data_seed(0, 3, 1, 2, "*.txt" + std::string(1, '\0') + text + '\0' + text));
  put("data", "one-file", data_seed(0, 5, 0, 1, "a.txt" + std::string(1, '\0') + text));
  put("data", "fortunes",
      data_seed(1, 7, 0, 1,
                std::string(1, '\0') +
                    "A fortune.\n%\nAnother one,\n  with two lines.\n%\r\n%\nLast.\n"));
  put("data", "val-data", data_seed(2, 6, 0, 1, std::string(1, '\0') + text + '\0' + text));

  // cli: one argument list per command, NUL-separated
  put("cli", "train",
      args({"train", "--steps", "100", "--tp", "2", "--lr", "3e-3", "--micro_batch", "4", "--sp",
            "seq", "--dtype", "bf16", "--json"}));
  put("cli", "train-preset",
      args({"train", "--preset=gpt2-124m", "--save", "ck", "--warmup", "5", "--min-lr", "1e-5",
            "--seed", "7", "--config", "run.json"}));
  put("cli", "eval",
      args({"eval", "--checkpoint", "ck", "--split", "val", "--batch", "4", "--max-tokens", "100",
            "--val-fraction", "0.2"}));
  put("cli", "generate",
      args({"generate", "--checkpoint", "ck", "--prompt-ids", "464,2068 50256", "--temperature",
            "0.5", "--top-k", "0"}));
  put("cli", "topology",
      args({"topology", "--world", "8", "--tp", "2", "--gtp", "2", "--order", "gtp-tp-dp",
            "--json"}));
  put("cli", "bench-comm",
      args({"bench", "comm", "--op", "all_gather", "--min", "1K", "--max", "64M", "--factor", "4",
            "--ranks", "2"}));
  put("cli", "bench-gemm", args({"bench", "gemm", "--dtype", "both", "--min-time", "0.5"}));
  put("cli", "bench-layer", args({"bench", "layer", "--tp", "2", "--sp", "batch", "--heads", "4"}));
  put("cli", "bench-step", args({"bench", "step", "--preset", "tiny", "--layers", "2"}));
  put("cli", "checkpoint-import",
      args({"checkpoint", "import", "model.safetensors", "ck", "--seed", "3"}));
  put("cli", "checkpoint-export",
      args({"checkpoint", "export", "ck", "out", "--max-shard-size", "64M"}));
  put("cli", "info", args({"info", "--json"}));
  put("cli", "checkpoint-inspect", args({"checkpoint", "inspect", "ck", "--json"}));

  // config: --config files
  put("config", "tiny.json", weft::fuzz::tiny_config().to_json().dump(2));
  put("config", "run.json",
      R"({"steps": "20", "micro-batch": 4, "tp": 1, "lr": 0.003, "sp": "seq", "dtype": "bf16",)"
      R"( "min_lr": 1e-4, "warmup": 2, "dropout": 0.1, "vocab-pad": 64})");
  put("config", "preset.json", R"({"preset": "gpt2-124m", "layers": 2, "stop-at": 5})");
  // plan: --cluster descriptions, --evaluate layouts, --memory-limit sizes
  put("plan", "cluster.json",
      R"({"name": "H100 SXM", "gpus_per_node": 8, "peak_tflops": 989.4,)"
      R"( "gemm_efficiency": 0.7, "nvlink_GBps": 450, "network_GBps": 50, "latency_us": 10})");
  put("plan", "layout_405b.txt",
      "--tp 8 --sp seq --pp 16 --vpp 2 --dp 64 --micro-batch 1 --grad-accum 32");
  put("plan", "layout_levers.txt",
      "--tp 2 --cp 2 --distributed-optimizer --dp 2 --recompute full --recompute-layers 2 "
      "--micro-batch 4");
  put("plan", "limit.txt", "40GiB");
  std::printf("wrote the seed corpus to %s\n", out.c_str());
  return 0;
}
