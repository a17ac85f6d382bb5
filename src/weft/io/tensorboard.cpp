#include "weft/io/tensorboard.h"

#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <utility>

#include "weft/core/error.h"
#include "weft/io/tensorboard_event.pb.h"

namespace weft::io {

namespace {

// The byte-at-a-time table of the reflected Castagnoli polynomial. Debian 12
// has no C++ CRC-32C library that is easy to depend on (no libcrc32c-dev), so
// this is the small table implementation, checked against RFC 3720's vectors
// in the tests and against TensorBoard's own reader.
constexpr std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kCrc32cTable = make_crc32c_table();

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  std::array<char, 256> buf{};
  if (gethostname(buf.data(), buf.size() - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf.data();
}

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint32_t crc_of(std::string_view s) {
  return crc32c({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
}

}  // namespace

uint32_t crc32c(std::span<const uint8_t> bytes) {
  uint32_t c = 0xFFFFFFFFu;
  for (uint8_t b : bytes) c = kCrc32cTable[(c ^ b) & 0xff] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t mask_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

std::string tensorboard_file_name(int64_t unix_time, std::string_view hostname) {
  return format("events.out.tfevents.{}.{}", unix_time, hostname);
}

EventFileWriter::EventFileWriter(std::string path) : path_(std::move(path)) {
  file_ = std::fopen(path_.c_str(), "wb");
  WEFT_CHECK(file_ != nullptr, "cannot write the TensorBoard event file {}: {}", path_,
             std::strerror(errno));
  tensorboard::Event event;
  event.set_wall_time(now_seconds());
  event.set_file_version("brain.Event:2");
  record(event.SerializeAsString());
  flush();
}

EventFileWriter EventFileWriter::in_directory(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  WEFT_CHECK(!ec && fs::is_directory(dir), "cannot create the --tensorboard directory {}: {}", dir,
             ec ? ec.message() : "a file of that name exists");
  const std::string base =
      (fs::path(dir) / tensorboard_file_name(static_cast<int64_t>(now_seconds()), host_name()))
          .string();
  std::string path = base;
  for (int n = 1; fs::exists(path); ++n) path = format("{}.{}", base, n);
  return EventFileWriter(path);
}

EventFileWriter::EventFileWriter(EventFileWriter&& other) noexcept
    : path_(std::move(other.path_)), file_(std::exchange(other.file_, nullptr)) {}

EventFileWriter::~EventFileWriter() {
  if (file_) std::fclose(file_);
}

void EventFileWriter::record(const std::string& bytes) {
  WEFT_CHECK(file_ != nullptr, "the TensorBoard event file {} is closed", path_);
  std::string header;
  put_le(header, bytes.size(), 8);
  put_le(header, mask_crc32c(crc_of(header)), 4);
  std::string footer;
  put_le(footer, mask_crc32c(crc_of(bytes)), 4);
  bool ok = std::fwrite(header.data(), 1, header.size(), file_) == header.size() &&
            std::fwrite(bytes.data(), 1, bytes.size(), file_) == bytes.size() &&
            std::fwrite(footer.data(), 1, footer.size(), file_) == footer.size();
  WEFT_CHECK(ok, "cannot write the TensorBoard event file {}: {}", path_, std::strerror(errno));
}

void EventFileWriter::scalar(std::string_view tag, int64_t step, double value) {
  tensorboard::Event event;
  event.set_wall_time(now_seconds());
  event.set_step(step);
  auto* v = event.mutable_summary()->add_value();
  v->set_tag(std::string(tag));
  v->set_simple_value(static_cast<float>(value));
  record(event.SerializeAsString());
}

void EventFileWriter::flush() {
  WEFT_CHECK(file_ != nullptr, "the TensorBoard event file {} is closed", path_);
  WEFT_CHECK(std::fflush(file_) == 0, "cannot write the TensorBoard event file {}: {}", path_,
             std::strerror(errno));
}

void EventFileWriter::close() {
  if (!file_) return;
  const int flushed = std::fflush(file_);
  const int flush_errno = errno;
  const int closed = std::fclose(file_);
  file_ = nullptr;
  WEFT_CHECK(flushed == 0 && closed == 0, "cannot write the TensorBoard event file {}: {}", path_,
             std::strerror(flushed != 0 ? flush_errno : errno));
}

}  // namespace weft::io
