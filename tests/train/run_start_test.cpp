// What a resumed run does to its metrics file. Where a run starts (plan_start)
// is tested through the CLI: tests/apps/lost_work.py.
#include "weft/train/run_start.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

#include "testing.h"

namespace weft::train {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(RunStart, TruncateMetricsDropsTheLinesPastTheStepAndTornOnes) {
  const weft::testing::TempDir tmp;
  const std::string path = tmp.path("m.jsonl");
  std::ofstream(path) << "{\"step\":1,\"loss\":5.5}\n{\"step\":2,\"loss\":5.2}\n"
                         "{\"step\":3,\"loss\":5.0}\n{\"step\":4,\"loss\":4.9}\n{\"step\":5,\"lo";
  EXPECT_EQ(truncate_metrics(path, 2), 3);
  EXPECT_EQ(read_text(path), "{\"step\":1,\"loss\":5.5}\n{\"step\":2,\"loss\":5.2}\n");
  // Nothing past the step: the file stays as it is; a missing file is no error.
  EXPECT_EQ(truncate_metrics(path, 2), 0);
  EXPECT_EQ(truncate_metrics(tmp.path("absent.jsonl"), 2), 0);
  EXPECT_EQ(tmp.entries(), (std::vector<std::string>{"m.jsonl"}));
}

}  // namespace
}  // namespace weft::train
