// The --save directory of a run (step directories, `latest`, --keep) and the
// signals that stop a run. The whole story through the CLI is
// tests/apps/lost_work.py.
#include "weft/io/checkpoint_dir.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "testing.h"
#include "weft/comm/local.h"
#include "weft/train/stop_signal.h"

namespace weft::train {
namespace {

namespace fs = std::filesystem;
using weft::testing::TempDir;

// A stand-in for a complete checkpoint of `step` in `dir` (checkpoint_dir
// only looks for index.json).
void fake_checkpoint(const std::string& dir, int64_t step) {
  const fs::path d = fs::path(dir) / io::step_dir_name(step);
  fs::create_directories(d);
  std::ofstream(d / "index.json") << "{}";
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void publish(const std::string& dir, int64_t step, int64_t keep, bool drop_others = false) {
  comm::run_local(1, [&](comm::ProcessGroup& world) {
    io::publish_checkpoint(dir, step, keep, drop_others, world);
  });
}

using weft::testing::error_of;

TEST(CheckpointDir, LatestPointsAtTheNewestAndKeepKeepsThatMany) {
  const TempDir tmp;
  const std::string dir = tmp.path("run");
  EXPECT_EQ(io::step_dir_name(20), "step-000020");
  for (int64_t step : {2, 4, 6}) {
    fake_checkpoint(dir, step);
    publish(dir, step, 2);
  }
  EXPECT_EQ(entries(dir), (std::vector<std::string>{"latest", "step-000004", "step-000006"}));
  EXPECT_EQ(read_text(dir + "/latest"), "step-000006\n");
  EXPECT_EQ(io::resolve_checkpoint(dir), dir + "/step-000006");
  // A step directory names itself.
  EXPECT_EQ(io::resolve_checkpoint(dir + "/step-000004"), dir + "/step-000004");
  // keep 0 keeps all.
  fake_checkpoint(dir, 8);
  publish(dir, 8, 0);
  EXPECT_EQ(entries(dir).size(), 4u);
}

TEST(CheckpointDir, StepsPastTheNewOneGoAndOverwriteDropsTheOthers) {
  const TempDir tmp;
  const std::string dir = tmp.path("run");
  for (int64_t step : {2, 4, 8}) fake_checkpoint(dir, step);
  // Resumed from step 4 and saved at 6: step 8 belongs to a history that is gone.
  fake_checkpoint(dir, 6);
  publish(dir, 6, 3);
  EXPECT_EQ(entries(dir),
            (std::vector<std::string>{"latest", "step-000002", "step-000004", "step-000006"}));
  // --overwrite: the first checkpoint of the new run alone remains, and what
  // an interrupted save left goes too.
  fs::create_directories(dir + "/step-000005.tmp-12-34");
  fake_checkpoint(dir, 1);
  publish(dir, 1, 3, true);
  EXPECT_EQ(entries(dir), (std::vector<std::string>{"latest", "step-000001"}));
}

TEST(CheckpointDir, ResolvesWithoutAPointerAndNamesWhatIsWrong) {
  const TempDir tmp;
  const std::string dir = tmp.path("run");
  // A crash before the first pointer: the newest complete step directory.
  fake_checkpoint(dir, 3);
  fake_checkpoint(dir, 5);
  fs::create_directories(dir + "/step-000007");  // incomplete: no index.json
  EXPECT_EQ(io::resolve_checkpoint(dir), dir + "/step-000005");
  EXPECT_TRUE(io::holds_checkpoint(dir));

  std::ofstream(dir + "/latest") << "step-000009\n";
  EXPECT_NE(
      error_of([&] { io::resolve_checkpoint(dir); }).find("names step-000009, which holds no "),
      std::string::npos);
  std::ofstream(dir + "/latest") << "../elsewhere\n";
  EXPECT_NE(error_of([&] { io::resolve_checkpoint(dir); }).find("does not name a step directory"),
            std::string::npos);

  // What a run killed before its first checkpoint leaves.
  const std::string empty = tmp.path("empty");
  fs::create_directories(empty + "/step-000001.tmp-12-34");
  EXPECT_FALSE(io::holds_checkpoint(empty));
  EXPECT_NE(error_of([&] { io::resolve_checkpoint(empty); }).find("holds no checkpoint yet"),
            std::string::npos);

  // An older weft's checkpoint, directly in its directory; a file.
  const std::string legacy = tmp.path("legacy");
  fs::create_directories(legacy);
  std::ofstream(legacy + "/index.json") << "{}";
  EXPECT_EQ(io::resolve_checkpoint(legacy), legacy);
  EXPECT_TRUE(io::holds_checkpoint(legacy));
  EXPECT_EQ(io::resolve_checkpoint(legacy + "/index.json"), legacy + "/index.json");
}

TEST(CheckpointDir, PrepareSaveDirAcceptsRunDirectoriesOnly) {
  const TempDir tmp;
  io::prepare_save_dir(tmp.path("new/run"));
  EXPECT_TRUE(fs::is_directory(tmp.path("new/run")));
  fake_checkpoint(tmp.path("new/run"), 1);
  io::prepare_save_dir(tmp.path("new/run"));
  std::ofstream(tmp.path("notes.txt")) << "x";
  EXPECT_NE(
      error_of([&] { io::prepare_save_dir(tmp.path("notes.txt")); }).find("is not a directory"),
      std::string::npos);
  fs::create_directories(tmp.path("src"));
  std::ofstream(tmp.path("src/main.cpp")) << "x";
  EXPECT_NE(error_of([&] { io::prepare_save_dir(tmp.path("src")); }).find("not a weft checkpoint"),
            std::string::npos);
}

TEST(StopSignals, RecordTheFirstSignalAndRestoreTheHandlers) {
  struct sigaction before {};
  ::sigaction(SIGTERM, nullptr, &before);
  {
    const StopSignals signals;
    EXPECT_EQ(StopSignals::pending(), 0);
    ::raise(SIGTERM);  // one only: a second would end this process
    EXPECT_EQ(StopSignals::pending(), SIGTERM);
  }
  struct sigaction after {};
  ::sigaction(SIGTERM, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
  // A new run starts with no signal recorded.
  const StopSignals again;
  EXPECT_EQ(StopSignals::pending(), 0);
  EXPECT_STREQ(signal_name(SIGINT), "SIGINT");
}

TEST(StopSignals, AnIgnoredSigintStaysIgnored) {
  struct sigaction ignore {
  }, before{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGINT, &ignore, &before);
  {
    const StopSignals signals;
    ::raise(SIGINT);
    EXPECT_EQ(StopSignals::pending(), 0);
  }
  struct sigaction after {};
  ::sigaction(SIGINT, &before, &after);
  EXPECT_EQ(after.sa_handler, SIG_IGN);
}

}  // namespace
}  // namespace weft::train
