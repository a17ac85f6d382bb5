// TensorBoard event files: the scalars of a run, readable by
// `tensorboard --logdir DIR`.
//
// A file is a sequence of TFRecords (little-endian uint64 length, masked
// CRC-32C of the length, the bytes, masked CRC-32C of the bytes) each holding
// one serialized Event (tensorboard_event.proto, wire-compatible with
// TensorFlow's): first {wall_time, file_version "brain.Event:2"}, then one
// event per scalar {wall_time, step, summary {tag, simple_value}}.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <string_view>

namespace weft::io {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord uses:
// crc32c("123456789") == 0xE3069283.
uint32_t crc32c(std::span<const uint8_t> bytes);
// TFRecord's masking: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t mask_crc32c(uint32_t crc);

// `events.out.tfevents.<unix time>.<hostname>`, the name TensorBoard looks for.
std::string tensorboard_file_name(int64_t unix_time, std::string_view hostname);

// Writes one event file. Errors (a directory that cannot be created, a full
// disk) are weft::Error naming the file.
class EventFileWriter {
 public:
  // Creates `path` (truncating it) and writes the file_version event.
  explicit EventFileWriter(std::string path);
  // A new file in `dir` (created if missing) named as TensorBoard expects;
  // `.1`, `.2`, ... is appended when that name is taken.
  static EventFileWriter in_directory(const std::string& dir);
  ~EventFileWriter();
  EventFileWriter(EventFileWriter&& other) noexcept;
  EventFileWriter& operator=(EventFileWriter&&) = delete;
  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;

  const std::string& path() const { return path_; }
  // Buffers one scalar event at `step`, stamped with the current time.
  void scalar(std::string_view tag, int64_t step, double value);
  // Hands what is buffered to the operating system.
  void flush();
  // Flushes and closes; further calls fail. The destructor closes quietly.
  void close();

 private:
  void record(const std::string& bytes);

  std::string path_;
  std::FILE* file_ = nullptr;
};

}  // namespace weft::io
