#include "weft/io/checkpoint_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "weft/core/error.h"
#include "weft/core/tensor.h"

namespace weft::io {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kStepPrefix = "step-";

// The step of a directory named "step-NNNNNN" (digits only), else nullopt.
std::optional<int64_t> step_of(const std::string& name) {
  if (!name.starts_with(kStepPrefix) || name.size() == kStepPrefix.size()) return std::nullopt;
  int64_t step = 0;
  const char* first = name.data() + kStepPrefix.size();
  const char* last = name.data() + name.size();
  auto [end, ec] = std::from_chars(first, last, step);
  if (ec != std::errc() || end != last || step < 0) return std::nullopt;
  return step;
}

// The complete step directories of `dir` (those with an index.json), by step.
std::map<int64_t, fs::path> step_dirs(const fs::path& dir) {
  std::map<int64_t, fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const auto step = step_of(e.path().filename().string());
    if (step && fs::exists(e.path() / "index.json", ec)) out[*step] = e.path();
  }
  return out;
}

void fsync_path(const fs::path& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  WEFT_CHECK(fd >= 0, "cannot open {}: {}", path.string(), std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  WEFT_CHECK(rc == 0, "cannot sync {}: {}", path.string(), std::strerror(err));
}

// DIR/latest = name, replaced atomically.
void write_latest(const fs::path& dir, const std::string& name) {
  const fs::path tmp = dir / (std::string(kLatestFile) + ".tmp");
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << name << "\n";
    out.flush();
    WEFT_CHECK(out.good(), "cannot write {}: {}", tmp.string(), std::strerror(errno));
  }
  fsync_path(tmp, O_RDONLY);
  const fs::path latest = dir / kLatestFile;
  WEFT_CHECK(std::rename(tmp.c_str(), latest.c_str()) == 0, "cannot rename {} to {}: {}",
             tmp.string(), latest.string(), std::strerror(errno));
  fsync_path(dir, O_RDONLY | O_DIRECTORY);
}

// Runs fn on rank 0; every rank returns, or throws rank 0's error.
void on_root(comm::ProcessGroup& world, const std::function<void()>& fn) {
  constexpr int64_t kBytes = 1024;
  Tensor message = Tensor::zeros({kBytes}, DType::u8);
  if (world.rank() == 0) {
    try {
      fn();
    } catch (const std::exception& e) {
      const std::string text = e.what();
      std::memcpy(message.raw(), text.data(), std::min<size_t>(text.size(), kBytes - 1));
      if (text.empty()) static_cast<char*>(message.raw())[0] = '?';
    }
  }
  world.broadcast(message, 0).wait();
  const char* text = static_cast<const char*>(message.raw());
  if (*text) throw Error(std::string(text, ::strnlen(text, kBytes)));
}

}  // namespace

std::string step_dir_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%06lld", static_cast<long long>(step));
  return buf;
}

std::string resolve_checkpoint(const std::string& path) {
  const fs::path dir(path);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return path;
  const fs::path pointer = dir / kLatestFile;
  if (fs::is_regular_file(pointer, ec)) {
    std::ifstream in(pointer);
    std::string name;
    std::getline(in, name);
    WEFT_CHECK(step_of(name).has_value(),
               "{} does not name a step directory (it holds '{}'): write the name of the "
               "checkpoint to resume, e.g. step-000020, or pass that directory itself",
               pointer.string(), name.substr(0, 64));
    WEFT_CHECK(fs::exists(dir / name / "index.json", ec),
               "{} names {}, which holds no complete checkpoint: pass one of the step directories "
               "of {} that does",
               pointer.string(), name, path);
    return (dir / name).string();
  }
  if (fs::exists(dir / "index.json", ec)) return path;
  const auto steps = step_dirs(dir);
  if (!steps.empty()) return steps.rbegin()->second.string();
  // Empty, or only what interrupted saves leave (step-*.tmp-*).
  bool leftovers_only = true;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    leftovers_only &= step_of(name.substr(0, name.find('.'))).has_value();
  }
  WEFT_CHECK(!leftovers_only,
             "{} holds no checkpoint yet: the run saving there stopped before its first "
             "checkpoint was complete. Run it again (it starts afresh), or pass a directory "
             "that holds one",
             path);
  return path;
}

bool in_run_dir(const std::string& checkpoint, const std::string& run_dir) {
  std::error_code ec;
  const fs::path c = fs::weakly_canonical(checkpoint, ec);
  const fs::path r = fs::weakly_canonical(run_dir, ec);
  return c == r || c.parent_path() == r;
}

bool holds_checkpoint(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return false;
  const fs::path d(dir);
  return fs::exists(d / kLatestFile, ec) || fs::exists(d / "index.json", ec) ||
         !step_dirs(d).empty();
}

void prepare_save_dir(const std::string& dir) {
  std::error_code ec;
  const fs::path d(dir);
  if (fs::is_directory(d, ec)) {
    bool weft_files = fs::exists(d / kLatestFile, ec) || fs::exists(d / "index.json", ec);
    for (const auto& e : fs::directory_iterator(d, ec)) {
      const std::string name = e.path().filename().string();
      if (step_of(name.substr(0, name.find('.')))) weft_files = true;
    }
    WEFT_CHECK(weft_files || fs::is_empty(d, ec),
               "--save {} is a directory that is not a weft checkpoint (no step-* directories, "
               "no index.json): choose a new directory",
               dir);
    return;
  }
  WEFT_CHECK(!fs::exists(d, ec), "--save {} exists and is not a directory: pass a directory", dir);
  fs::create_directories(d, ec);
  WEFT_CHECK(!ec, "cannot create the --save directory {}: {}", dir, ec.message());
}

std::vector<std::string> publish_checkpoint(const std::string& dir, int64_t step, int64_t keep,
                                            bool drop_others, comm::ProcessGroup& world) {
  std::vector<std::string> removed;
  on_root(world, [&] {
    const fs::path d(dir);
    write_latest(d, step_dir_name(step));
    int64_t kept = 0;
    const auto steps = step_dirs(d);
    for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
      const auto& [s, path] = *it;
      const bool keep_it = s == step || (!drop_others && s < step && (keep == 0 || kept < keep));
      if (keep_it) {
        ++kept;
        continue;
      }
      fs::remove_all(path);
      removed.push_back(path.string());
    }
    // What interrupted saves left (step-*.tmp-*, step-*.old-*): saves run one at a time.
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(d, ec)) {
      const std::string name = e.path().filename().string();
      const auto dot = name.find('.');
      if (dot != std::string::npos && step_of(name.substr(0, dot))) fs::remove_all(e.path());
    }
  });
  return removed;
}

}  // namespace weft::io
