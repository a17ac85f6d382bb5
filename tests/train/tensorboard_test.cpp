// TensorBoard event files: CRC-32C against RFC 3720's vectors, and files
// read back record by record (length, masked CRCs, Event messages) after the
// writer and the run's MetricsLog wrote them. Write errors are weft::Error.
#include "weft/io/tensorboard.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "weft/core/error.h"
#include "weft/io/tensorboard_event.pb.h"
#include "weft/train/metrics.h"

namespace weft::train {
namespace {

namespace fs = std::filesystem;

uint32_t crc_of(const std::string& s) {
  return io::crc32c({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
}

uint64_t read_le(const std::string& bytes, size_t at, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= uint64_t{static_cast<uint8_t>(bytes[at + i])} << (8 * i);
  return v;
}

// Every record of a TFRecord file, each checked against its two CRCs and
// parsed as an Event.
std::vector<tensorboard::Event> read_events(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<tensorboard::Event> events;
  size_t at = 0;
  while (at < bytes.size()) {
    EXPECT_LE(at + 12, bytes.size()) << "truncated record header at byte " << at;
    if (at + 12 > bytes.size()) break;
    const uint64_t length = read_le(bytes, at, 8);
    EXPECT_EQ(read_le(bytes, at + 8, 4), io::mask_crc32c(crc_of(bytes.substr(at, 8))))
        << "length CRC at byte " << at;
    EXPECT_LE(at + 12 + length + 4, bytes.size()) << "truncated record at byte " << at;
    if (at + 12 + length + 4 > bytes.size()) break;
    const std::string data = bytes.substr(at + 12, length);
    EXPECT_EQ(read_le(bytes, at + 12 + length, 4), io::mask_crc32c(crc_of(data)))
        << "data CRC at byte " << at;
    tensorboard::Event event;
    EXPECT_TRUE(event.ParseFromString(data)) << "record at byte " << at << " is no Event";
    events.push_back(event);
    at += 12 + length + 4;
  }
  return events;
}

// tag -> step -> value, from the summary events.
std::map<std::string, std::map<int64_t, float>> scalars(
    const std::vector<tensorboard::Event>& events) {
  std::map<std::string, std::map<int64_t, float>> out;
  for (const auto& e : events) {
    if (!e.has_summary()) continue;
    for (const auto& v : e.summary().value()) out[v.tag()][e.step()] = v.simple_value();
  }
  return out;
}

fs::path scratch(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("weft_tb_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(Crc32c, Rfc3720Vectors) {
  EXPECT_EQ(crc_of("123456789"), 0xE3069283u);
  EXPECT_EQ(crc_of(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc_of(std::string(32, '\xff')), 0x62A8AB43u);
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  EXPECT_EQ(crc_of(ascending), 0x46DD794Eu);
  EXPECT_EQ(crc_of(""), 0u);
  // TFRecord's mask: rotate right by 15, add a constant.
  EXPECT_EQ(io::mask_crc32c(0), 0xa282ead8u);
  EXPECT_EQ(io::mask_crc32c(0x00008000u), 0xa282ead9u);
}

TEST(EventFile, RecordsReadBack) {
  const fs::path dir = scratch("records");
  const std::string path = (dir / "events.out.tfevents.1.test").string();
  // The wall time is the system clock's, which a time daemon may step while
  // the test runs (a VM's clock was seen stepping back by more than a second):
  // it must be Unix seconds of about now, within a minute.
  constexpr double kSlack = 60;
  const double before = static_cast<double>(std::time(nullptr)) - kSlack;
  {
    io::EventFileWriter w(path);
    w.scalar("loss", 1, 5.25);
    w.scalar("loss", 2, 4.5);
    w.scalar("lr", 2, 6e-4);
    w.close();
  }
  const auto events = read_events(path);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  EXPECT_GE(events[0].wall_time(), before);
  EXPECT_LE(events[0].wall_time(), static_cast<double>(std::time(nullptr)) + kSlack);
  auto s = scalars(events);
  EXPECT_EQ(s["loss"][1], 5.25f);
  EXPECT_EQ(s["loss"][2], 4.5f);
  EXPECT_EQ(s["lr"][2], 6e-4f);
  EXPECT_GE(events[3].wall_time(), events[0].wall_time() - kSlack);
  fs::remove_all(dir);
}

TEST(EventFile, NamedAsTensorBoardExpects) {
  EXPECT_EQ(io::tensorboard_file_name(1700000000, "node7"), "events.out.tfevents.1700000000.node7");
  const fs::path dir = scratch("names");
  const std::string a = io::EventFileWriter::in_directory((dir / "new" / "sub").string()).path();
  const std::regex name(R"(events\.out\.tfevents\.[0-9]{10}\.[^/]+)");
  EXPECT_TRUE(std::regex_match(fs::path(a).filename().string(), name)) << a;
  // A second writer in the same second does not replace the first file.
  const std::string b = io::EventFileWriter::in_directory((dir / "new" / "sub").string()).path();
  EXPECT_NE(a, b);
  EXPECT_TRUE(fs::exists(a));
  fs::remove_all(dir);
}

TEST(EventFile, WriteErrorsAreClear) {
  // /dev/full accepts the open and fails every write with ENOSPC.
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  try {
    io::EventFileWriter w("/dev/full");
    FAIL() << "writing to /dev/full succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write the TensorBoard event file /dev/full"),
              std::string::npos)
        << e.what();
  }
  const fs::path dir = scratch("notadir");
  std::ofstream(dir / "file") << "x";
  try {
    MetricsLog log({.tensorboard = (dir / "file").string()});
    FAIL() << "a file was taken for the --tensorboard directory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create the --tensorboard directory"),
              std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

StepReport report(int64_t step, double loss, std::optional<double> val) {
  StepReport r;
  r.result.step = step;
  r.result.loss = loss;
  r.result.lr = 1e-3 * static_cast<double>(step);
  r.result.grad_norm = 0.5 + static_cast<double>(step);
  r.result.times.total = 0.25;
  r.tokens_per_s = 1000.0 * static_cast<double>(step);
  r.val_loss = val;
  r.total_steps = 3;
  return r;
}

TEST(MetricsLog, JsonlAndEventsHoldEveryStep) {
  const fs::path dir = scratch("metrics");
  MetricsLog log(
      {.jsonl = (dir / "m.jsonl").string(), .tensorboard = (dir / "tb").string(), .log_every = 2});
  log.write(report(1, 5.5, std::nullopt));
  log.write(report(2, 4.25, 4.75));
  // Flushed at the log step: the two steps are on disk before close.
  std::vector<fs::path> files;
  for (const auto& f : fs::directory_iterator(dir / "tb")) files.push_back(f.path());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(scalars(read_events(files[0].string()))["loss"].size(), 2u);
  log.write(report(3, 3.5, 3.75));
  log.close();

  auto s = scalars(read_events(files[0].string()));
  EXPECT_EQ(s["loss"], (std::map<int64_t, float>{{1, 5.5f}, {2, 4.25f}, {3, 3.5f}}));
  EXPECT_EQ(s["val_loss"], (std::map<int64_t, float>{{2, 4.75f}, {3, 3.75f}}));
  EXPECT_EQ(s["lr"][3], 3e-3f);
  EXPECT_EQ(s["grad_norm"][2], 2.5f);
  EXPECT_EQ(s["tokens_per_s"][3], 3000.0f);
  EXPECT_EQ(s.size(), 5u);

  std::ifstream in(dir / "m.jsonl");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 3u);
  const io::Json second = io::parse_json(lines[1]);
  EXPECT_EQ(second.at("step").as_int(), 2);
  EXPECT_EQ(second.at("val_loss").as_double(), 4.75);
  EXPECT_EQ(lines[0].find("val_loss"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace weft::train
