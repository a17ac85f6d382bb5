#include "weft/plan/machine.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "weft/comm/world.h"
#include "weft/core/exec_context.h"
#include "weft/core/threads.h"
#include "weft/io/json.h"
#include "weft/kernels/gemm.h"

namespace weft::plan {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The fastest of `reps` runs of fn (after one untimed run).
template <typename F>
double best_of(int reps, F&& fn) {
  fn();
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    fn();
    best = std::min(best, seconds_since(t0));
  }
  return best;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(colon + 1);
        name.erase(0, name.find_first_not_of(' '));
        return name;
      }
    }
  }
  return "unknown processor";
}

struct Probe {
  double gemm_peak = 0;        // FLOP/s
  double gemm_half_flops = 0;  // FLOPs per product at half the peak
  double copy_bandwidth = 0;   // bytes copied per second (one thread)
  double latency_s = 0;        // a small all-reduce between two local ranks
};

double gemm_rate(const ExecContext& ec, DType dtype, int64_t size, int reps) {
  Tensor a = ec.empty({size, size}, dtype, MemoryTag::other);
  Tensor b = ec.empty({size, size}, dtype, MemoryTag::other);
  Tensor c = ec.empty({size, size}, dtype, MemoryTag::other);
  a.fill(0.5f);
  b.fill(0.25f);
  const double s = best_of(reps, [&] { kernels::gemm(ec, a, b, c); });
  return 2.0 * static_cast<double>(size * size * size) / s;
}

Probe run_probes(DType dtype, int threads) {
  Probe p;
  const ExecContext ec(Device::cpu(), threads);
  // f32 and bf16 products alike (the CPU's bf16 GEMMs take bf16 operands).
  // A product of f FLOPs takes t0 + f / peak: the call's fixed cost (oneDNN's
  // dispatch, the thread team's start), timed on an 8³ product whose FLOPs
  // are negligible, and the FLOPs at the peak rate, from a 512³ product (the
  // fastest of many runs each: the machine may be busy).
  const double f0 = 2.0 * 8 * 8 * 8, f2 = 2.0 * 512 * 512 * 512;
  const double t0 = f0 / gemm_rate(ec, dtype, 8, 200);
  const double t2 = f2 / gemm_rate(ec, dtype, 512, 10);
  p.gemm_peak = f2 / std::max(t2 - t0, t2 / 2);
  p.gemm_half_flops = t0 * p.gemm_peak;
  const size_t bytes = size_t{64} << 20;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  p.copy_bandwidth =
      static_cast<double>(bytes) / best_of(3, [&] { std::memcpy(dst.data(), src.data(), bytes); });
  // The local backend's collective latency: a 4-element all-reduce.
  std::vector<double> latency(2, 0);
  comm::run_world(2, [&](comm::ProcessGroup& world) {
    Tensor t = Tensor::zeros({4});
    constexpr int kReps = 200;
    world.all_reduce(t).wait();
    const auto start = Clock::now();
    for (int i = 0; i < kReps; ++i) world.all_reduce(t).wait();
    latency[static_cast<size_t>(world.rank())] = seconds_since(start) / kReps;
  });
  p.latency_s = std::max(latency[0], latency[1]);
  return p;
}

std::filesystem::path cache_file() {
  return std::filesystem::path(probe_cache_dir()) / "plan-probes.json";
}

// The cached probe for `key`, or a fresh one written to the cache (a cache
// that cannot be read or written is ignored: the probes run again).
// Holds an exclusive lock on the cache folder's lock file for its lifetime
// (none when the folder cannot be made): processes started together (an
// mpirun job's ranks choosing a layout) probe once, and read the same result.
class CacheLock {
 public:
  explicit CacheLock(const std::filesystem::path& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    fd_ = ::open((dir / "plan-probes.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ >= 0) (void)::flock(fd_, LOCK_EX);
  }
  ~CacheLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }
  CacheLock(const CacheLock&) = delete;
  CacheLock& operator=(const CacheLock&) = delete;

 private:
  int fd_ = -1;
};

Probe cached_probe(const std::string& key, DType dtype, int threads) {
  io::Json cache = io::Json::object();
  const std::filesystem::path file = cache_file();
  const CacheLock lock(file.parent_path());
  try {
    std::ifstream in(file);
    if (in.good()) {
      std::stringstream text;
      text << in.rdbuf();
      io::Json j = io::parse_json(text.str(), file.string());
      if (j.is_object()) cache = std::move(j);
    }
  } catch (const Error&) {
    cache = io::Json::object();
  }
  if (const io::Json* e = cache.find(key)) {
    try {
      Probe p{.gemm_peak = e->at("gemm_peak").as_double(),
              .gemm_half_flops = e->at("gemm_half_flops").as_double(),
              .copy_bandwidth = e->at("copy_bandwidth").as_double(),
              .latency_s = e->at("latency_s").as_double()};
      if (p.gemm_peak > 0 && p.copy_bandwidth > 0) return p;
    } catch (const Error&) {
    }
  }
  const Probe p = run_probes(dtype, threads);
  io::Json entry = io::Json::object();
  entry["gemm_peak"] = p.gemm_peak;
  entry["gemm_half_flops"] = p.gemm_half_flops;
  entry["copy_bandwidth"] = p.copy_bandwidth;
  entry["latency_s"] = p.latency_s;
  cache[key] = std::move(entry);
  std::error_code ec;
  // A name of this process's own: runs probing at once each rename a whole file.
  const std::filesystem::path tmp = file.string() + "." + std::to_string(::getpid()) + ".tmp";
  {
    std::ofstream out(tmp);
    out << cache.dump(2) << "\n";
  }
  std::filesystem::rename(tmp, file, ec);
  return p;
}

double positive_number(const io::Json& v, const std::string& key, const std::string& source) {
  WEFT_CHECK(v.is_number() && v.as_double() > 0, "{}: \"{}\" must be a positive number, got {}",
             source, key, v.dump());
  return v.as_double();
}

}  // namespace

std::string probe_cache_dir() {
  if (const char* d = std::getenv("WEFT_CACHE_DIR"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    return (std::filesystem::path(x) / "weft").string();
  }
  const char* home = std::getenv("HOME");
  return (std::filesystem::path(home && *home ? home : "/tmp") / ".cache" / "weft").string();
}

Machine cpu_machine(DType dtype, int world) {
  const int cores = available_cores();
  const int threads = std::max(1, cores / std::max(world, 1));
  const std::string key = format("{}|{} threads|{}", cpu_model_name(), threads, dtype_name(dtype));
  const Probe p = cached_probe(key, dtype, threads);
  // Ranks beyond the cores share them.
  const double share = std::min(1.0, static_cast<double>(cores) / (world * threads));
  Machine m;
  m.description =
      format("{}: {} cores, {} threads per rank ({} GEMMs {:.1f} GFLOP/s per rank)",
             cpu_model_name(), cores, threads, dtype_name(dtype), p.gemm_peak * share / 1e9);
  m.gemm_peak = p.gemm_peak * share;
  m.gemm_half_flops = p.gemm_half_flops;
  // Attention runs as 128-row blocks of GEMMs with the softmax passes
  // between: the GEMM rate of such a block, halved.
  m.attention_flops = 0.5 * m.gemm_rate(2.0 * 128 * 128 * 64);
  // memcpy reads and writes each byte: the memory-bound passes move twice
  // the copied bytes per second.
  m.memory_bandwidth = 2 * p.copy_bandwidth * share * threads;
  m.intra_bandwidth = p.copy_bandwidth * share;
  m.inter_bandwidth = m.intra_bandwidth;
  m.latency_s = p.latency_s;
  m.op_overhead_s = p.gemm_half_flops / p.gemm_peak;
  m.peak_flops = p.gemm_peak * share;
  return m;
}

Machine default_gpu_cluster() { return parse_cluster("{}", "the default cluster"); }

Machine parse_cluster(const std::string& text, const std::string& source) {
  const io::Json j = io::parse_json(text, source);
  WEFT_CHECK(j.is_object(), "{}: a cluster description is a JSON object, got {}", source,
             io::json_type_name(j.type()));
  std::map<std::string, double> v{
      {"gpus_per_node", 8},    {"peak_tflops", 989.4},         {"gemm_efficiency", 0.7},
      {"gemm_half_gflops", 2}, {"attention_efficiency", 0.45}, {"hbm_GBps", 3350},
      {"nvlink_GBps", 450},    {"network_GBps", 50},           {"latency_us", 10},
      {"kernel_launch_us", 4}};
  std::string name = "H100 SXM, 8 per node (NVLink 4, 400 Gb/s InfiniBand per GPU)";
  for (const auto& [key, value] : j.as_object()) {
    if (key == "name") {
      WEFT_CHECK(value.is_string(), "{}: \"name\" must be a string", source);
      name = value.as_string();
      continue;
    }
    auto it = v.find(key);
    WEFT_CHECK(it != v.end(),
               "{}: unknown key \"{}\"; a cluster description takes name, gpus_per_node, "
               "peak_tflops, gemm_efficiency, gemm_half_gflops, attention_efficiency, hbm_GBps, "
               "nvlink_GBps, network_GBps, latency_us and kernel_launch_us",
               source, key);
    it->second = positive_number(value, key, source);
  }
  WEFT_CHECK(v["gpus_per_node"] >= 1 && v["gpus_per_node"] == static_cast<int>(v["gpus_per_node"]),
             "{}: \"gpus_per_node\" must be a whole number of at least 1, got {}", source,
             v["gpus_per_node"]);
  WEFT_CHECK(v["gemm_efficiency"] <= 1 && v["attention_efficiency"] <= 1,
             "{}: the efficiencies are shares of the peak, at most 1", source);
  Machine m;
  m.gpu = true;
  m.description = name;
  m.peak_flops = v["peak_tflops"] * 1e12;
  m.gemm_peak = m.peak_flops * v["gemm_efficiency"];
  m.gemm_half_flops = v["gemm_half_gflops"] * 1e9;
  m.attention_flops = m.peak_flops * v["attention_efficiency"];
  m.memory_bandwidth = v["hbm_GBps"] * 1e9;
  m.intra_bandwidth = v["nvlink_GBps"] * 1e9;
  m.inter_bandwidth = v["network_GBps"] * 1e9;
  m.ranks_per_node = static_cast<int>(v["gpus_per_node"]);
  m.latency_s = v["latency_us"] * 1e-6;
  m.op_overhead_s = v["kernel_launch_us"] * 1e-6;
  return m;
}

}  // namespace weft::plan
