#include "weft/io/safetensors.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "testing.h"
#include "weft/io/json.h"

namespace weft::io {
namespace {

namespace fs = std::filesystem;

using weft::testing::TempDir;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A file with `header` (padded to 8 bytes) followed by `data_bytes` zero bytes.
std::string make_file(const std::string& header, size_t data_bytes) {
  std::string h = header;
  h.append((8 - h.size() % 8) % 8, ' ');
  uint64_t n = h.size();
  std::string bytes(reinterpret_cast<const char*>(&n), 8);
  return bytes + h + std::string(data_bytes, '\0');
}

// The message of the weft::Error that opening `path` raises.
std::string open_error(const std::string& path) {
  try {
    io::SafetensorsFile f(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

bool bytes_equal(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         (a.nbytes() == 0 || std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.nbytes())) == 0);
}

TEST(Safetensors, RoundTripsEveryDtypeAndMetadata) {
  TempDir dir;
  std::vector<io::NamedTensor> tensors;
  const DType all[] = {DType::f32,  DType::bf16, DType::f16, DType::e4m3, DType::e5m2,
                       DType::e8m0, DType::e2m1, DType::i32, DType::u8};
  uint32_t seed = 1;
  for (DType t : all) {
    tensors.push_back(
        {format("t.{}", dtype_name(t)), testing::random_tensor({3, 2, 4}, seed++, 0.1f, 4.0f, t)});
  }
  tensors.push_back({"scalar", Tensor::from({}, std::vector<float>{7.5f})});
  tensors.push_back({"empty", Tensor::empty({0, 5}, DType::f32)});
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"step", "12"}};
  const std::string path = dir.path("model.safetensors");
  io::write_safetensors(path, tensors, meta);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"model.safetensors"});

  io::SafetensorsFile f(path);
  EXPECT_EQ(f.metadata(), meta);
  ASSERT_EQ(f.tensors().size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const io::TensorInfo& info = f.tensors()[i];  // packed in the order written
    EXPECT_EQ(info.name, tensors[i].name);
    ASSERT_TRUE(info.weft_dtype.has_value());
    EXPECT_EQ(*info.weft_dtype, tensors[i].tensor.dtype());
    EXPECT_EQ(info.dtype, io::safetensors_dtype_name(tensors[i].tensor.dtype()));
    EXPECT_EQ(info.nbytes(), tensors[i].tensor.nbytes());
    EXPECT_TRUE(bytes_equal(f.load(info.name), tensors[i].tensor)) << info.name;
  }
  EXPECT_EQ(f.info("t.bf16").dtype, "BF16");
  EXPECT_EQ(f.info("t.fp4_e2m1").dtype, "F4");
  EXPECT_EQ(f.info("t.fp8_e4m3").dtype, "F8_E4M3");
  EXPECT_EQ(f.info("t.e8m0").dtype, "F8_E8M0");
  EXPECT_EQ(f.info("t.f32").shape, (std::vector<int64_t>{3, 2, 4}));
  EXPECT_TRUE(f.info("scalar").shape.empty());
  EXPECT_EQ(f.load("scalar").item(0), 7.5f);
}

TEST(Safetensors, HeaderIsPaddedJsonWithMetadataFirst) {
  TempDir dir;
  const std::string path = dir.path("a.safetensors");
  std::vector<io::NamedTensor> tensors = {{"w", Tensor::from({2, 3}, std::vector<float>(6, 1.0f))},
                                          {"b", Tensor::from_i32({1}, std::vector<int32_t>{5})}};
  io::write_safetensors(path, tensors, {{"k", "v"}});
  const std::string bytes = read_bytes(path);
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + 24 + 4);
  std::string header = bytes.substr(8, n);
  const std::string json =
      R"({"__metadata__":{"k":"v"},"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
      R"("b":{"dtype":"I32","shape":[1],"data_offsets":[24,28]}})";
  EXPECT_EQ(header.substr(0, json.size()), json);
  EXPECT_EQ(header.substr(json.size()), std::string(n - json.size(), ' '));
  EXPECT_EQ(header.size() - json.size(), (8 - json.size() % 8) % 8);
}

TEST(Safetensors, LoadsSlicesReadingOnlyTheirBytes) {
  TempDir dir;
  const std::string path = dir.path("s.safetensors");
  Tensor w = testing::random_tensor({6, 5, 4}, 3);
  Tensor q = testing::random_tensor({8, 6}, 4, -1, 1, DType::e2m1);
  io::write_safetensors(path, std::vector<io::NamedTensor>{{"w", w}, {"q", q}});
  io::SafetensorsFile f(path);

  EXPECT_TRUE(bytes_equal(f.load_rows("w", 2, 3), w.narrow(2, 3)));
  EXPECT_TRUE(bytes_equal(f.load_rows("w", 0, 6), w));
  EXPECT_EQ(f.load_rows("w", 6, 0).shape(), Shape({0, 5, 4}));
  // Dimension 1 and 2: compare against the naive copy.
  std::vector<float> all = w.to_vector();
  for (int dim : {1, 2}) {
    Tensor s = f.load_slice("w", dim, 1, 2);
    std::vector<float> got = s.to_vector();
    size_t k = 0;
    for (int64_t a = 0; a < 6; ++a)
      for (int64_t b = 0; b < 5; ++b)
        for (int64_t c = 0; c < 4; ++c) {
          const int64_t idx = dim == 1 ? b : c;
          if (idx < 1 || idx >= 3) continue;
          EXPECT_EQ(got[k++], all[static_cast<size_t>((a * 5 + b) * 4 + c)]);
        }
    EXPECT_EQ(k, got.size());
  }
  // fp4: rows of 6 elements are 3 whole bytes.
  EXPECT_TRUE(bytes_equal(f.load_rows("q", 3, 4), q.narrow(3, 4)));

  auto message = [&](auto fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message([&] { f.load_rows("w", 4, 3); }),
            path + ": slice [4, 7) of dimension 0 is outside tensor \"w\" of shape [6, 5, 4]");
  EXPECT_NE(message([&] { f.load_slice("q", 1, 1, 2); }).find("byte boundaries"),
            std::string::npos);
  EXPECT_NE(message([&] { f.load_slice("w", 3, 0, 1); }).find("no dimension 3"), std::string::npos);
  EXPECT_EQ(message([&] { f.load("nope"); }), path + " has no tensor \"nope\" (it holds: w, q)");
}

TEST(Safetensors, InspectsDtypesWeftCannotLoad) {
  TempDir dir;
  const std::string path = dir.path("hf.safetensors");
  write_bytes(path, make_file(R"({"pos":{"dtype":"I64","shape":[1,3],"data_offsets":[0,24]},)"
                              R"("w":{"dtype":"F32","shape":[2],"data_offsets":[24,32]}})",
                              32));
  io::SafetensorsFile f(path);
  EXPECT_EQ(f.info("pos").dtype, "I64");
  EXPECT_FALSE(f.info("pos").weft_dtype.has_value());
  EXPECT_EQ(f.load("w").to_vector(), (std::vector<float>{0, 0}));
  try {
    f.load("pos");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor \"pos\" is I64, which weft cannot load"),
              std::string::npos)
        << e.what();
  }
}

struct Corrupt {
  const char* what;
  std::string bytes;
  std::string message;  // expected after "<path>"
};

TEST(Safetensors, RejectsCorruptedFilesNamingTheProblem) {
  TempDir dir;
  const std::string good = R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
  std::string huge(8, '\0');
  huge[7] = 1;  // 2^56
  std::string beyond = make_file(good, 16);
  beyond[0] = static_cast<char>(200);  // header length 200 > file
  const std::vector<Corrupt> cases = {
      {"empty", "",
       " is not a safetensors file: it has 0 bytes, fewer than the 8-byte header "
       "length"},
      {"huge header", huge + "{}",
       " is corrupted or not a safetensors file: its header length 72057594037927936 exceeds "
       "the format's limit of 100000000 bytes"},
      {"header beyond file", beyond,
       " is truncated or corrupted: its header length is 200 bytes but only 80 bytes follow the "
       "length field"},
      {"truncated data", make_file(good, 10),
       " is truncated: header says 16 data bytes, file has 10; the write did not finish — write "
       "the file again or use another copy"},
      {"trailing bytes", make_file(good, 20),
       " is corrupted: it has 4 bytes after the last tensor (header says 16 data bytes, file "
       "has 20)"},
      {"bad json", make_file(R"({"a":{"dtype":"F32",,}})", 0),
       " header: invalid JSON at byte 20: expected a string key"},
      {"not an object", make_file("[1, 2]", 0),
       " is corrupted or not a safetensors file: its header does not start with '{'"},
      {"overlap",
       make_file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                 R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                 16),
       " is corrupted: tensors \"a\" [0, 16) and \"b\" [8, 16) overlap"},
      {"gap",
       make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                 R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                 12),
       " is corrupted: 4 unused bytes before tensor \"b\" (data bytes [4, 8)); safetensors packs "
       "tensors without gaps"},
      {"unknown dtype", make_file(R"({"a":{"dtype":"F12","shape":[1],"data_offsets":[0,4]}})", 4),
       ": tensor \"a\" has unknown dtype \"F12\""},
      {"shape/offset mismatch",
       make_file(R"({"a":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,16]}})", 16),
       ": tensor \"a\" has shape [2, 3] of BF16 (12 bytes) but its data_offsets [0, 16] span 16 "
       "bytes"},
      {"negative dim", make_file(R"({"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}})", 0),
       ": tensor \"a\" has shape entry -1 that is not a non-negative integer"},
      {"overflowing shape",
       make_file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})",
                 0),
       ": tensor \"a\" has shape [4294967296,4294967296] too large to address"},
      // Found while fuzzing: the slices of an empty tensor overflowed.
      {"overflowing shape with a zero dimension",
       make_file(R"({"a":{"dtype":"F32","shape":[0,4611686018427387904],"data_offsets":[0,0]}})",
                 0),
       ": tensor \"a\" has shape [0,4611686018427387904] too large to address"},
      {"reversed offsets", make_file(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}})", 0),
       ": tensor \"a\" has data_offsets [4, 0]; they must satisfy 0 <= begin <= end"},
      {"missing field", make_file(R"({"a":{"dtype":"U8","shape":[0]}})", 0),
       ": tensor \"a\" lacks its data_offsets"},
      {"extra field",
       make_file(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0],"eval":"x"}})", 0),
       ": tensor \"a\" has an unexpected field \"eval\" (expected dtype, shape and data_offsets)"},
      {"metadata value", make_file(R"({"__metadata__":{"k":1}})", 0),
       ": __metadata__ value \"k\" is a JSON integer, not a string"},
      {"duplicate", make_file(R"({"a":{},"a":{}})", 0),
       " header: invalid JSON at byte 8: duplicate key \"a\""},
      {"odd fp4", make_file(R"({"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", 2),
       ": tensor \"a\" (F4 [3]) does not fill whole bytes"},
  };
  for (const Corrupt& c : cases) {
    const std::string path = dir.path("bad.safetensors");
    write_bytes(path, c.bytes);
    EXPECT_EQ(open_error(path), path + c.message) << c.what;
  }
  EXPECT_EQ(open_error(dir.path("missing.safetensors")),
            "cannot open " + dir.path("missing.safetensors") + ": No such file or directory");
}

TEST(Safetensors, RejectsTruncatedCopiesOfARealFile) {
  TempDir dir;
  const std::string path = dir.path("full.safetensors");
  io::write_safetensors(path,
                        std::vector<io::NamedTensor>{{"w", testing::random_tensor({64, 64}, 9)},
                                                     {"b", testing::random_tensor({64}, 10)}});
  const std::string bytes = read_bytes(path);
  const std::string cut = dir.path("cut.safetensors");
  // Every prefix is rejected; none crashes or loads.
  for (size_t len = 0; len < bytes.size(); len += (len < 300 ? 1 : 97)) {
    write_bytes(cut, bytes.substr(0, len));
    EXPECT_THROW(io::SafetensorsFile{cut}, Error) << len;
  }
}

TEST(Safetensors, RandomCorruptionIsAnErrorOrHarmless) {
  TempDir dir;
  const std::string path = dir.path("full.safetensors");
  io::write_safetensors(
      path,
      std::vector<io::NamedTensor>{{"w", testing::random_tensor({4, 8}, 1)},
                                   {"q", Tensor::full({16}, 1.0f, DType::e2m1)},
                                   {"b", testing::random_tensor({3}, 2, 0, 1, DType::bf16)}},
      {{"step", "3"}});
  const std::string bytes = read_bytes(path);
  const std::string bad = dir.path("bad.safetensors");
  std::mt19937 gen(7);
  for (int trial = 0; trial < 3000; ++trial) {
    std::string b = bytes;
    const int flips = 1 + static_cast<int>(gen() % 3);
    for (int k = 0; k < flips; ++k) {
      // Mostly the length field and the header, where parsing happens.
      const size_t at = gen() % 4 ? gen() % std::min<size_t>(b.size(), 200) : gen() % b.size();
      b[at] = static_cast<char>(gen() % 4 ? gen() : b[at] ^ (1u << (gen() % 8)));
    }
    write_bytes(bad, b);
    try {
      io::SafetensorsFile f(bad);
      for (const io::TensorInfo& t : f.tensors()) {
        if (t.weft_dtype && t.shape.size() <= 4) {
          EXPECT_EQ(f.load(t.name).nbytes(), t.nbytes());
        }
      }
    } catch (const Error&) {
      // A weft::Error is the only acceptable failure.
    }
  }
}

TEST(Safetensors, WriteReplacesAnExistingFileAtomically) {
  TempDir dir;
  const std::string path = dir.path("ck.safetensors");
  io::write_safetensors(path, std::vector<io::NamedTensor>{{"x", Tensor::full({4}, 1.0f)}});
  io::write_safetensors(path, std::vector<io::NamedTensor>{{"y", Tensor::full({2}, 2.0f)}});
  io::SafetensorsFile f(path);
  ASSERT_EQ(f.tensors().size(), 1u);
  EXPECT_EQ(f.tensors()[0].name, "y");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"ck.safetensors"});
}

// Restores the file-size limit and SIGXFSZ when the test ends.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &saved_);
    old_handler_ = signal(SIGXFSZ, SIG_IGN);
    rlimit lim = saved_;
    lim.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &lim);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved_);
    signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit saved_{};
  sighandler_t old_handler_;
};

TEST(Safetensors, FailedWriteLeavesNoFileAndKeepsTheOldOne) {
  TempDir dir;
  const std::string path = dir.path("ck.safetensors");
  const Tensor old_tensor = Tensor::full({4}, 3.0f);
  io::write_safetensors(path, std::vector<io::NamedTensor>{{"old", old_tensor}});
  const std::string before = read_bytes(path);

  // Disk full, as the kernel reports it when a write crosses RLIMIT_FSIZE.
  std::string message;
  {
    FileSizeLimit limit(4096);
    try {
      io::write_safetensors(path, std::vector<io::NamedTensor>{{"big", Tensor::zeros({1 << 16})}});
    } catch (const Error& e) {
      message = e.what();
    }
  }
  EXPECT_NE(
      message.find("cannot write " + path + ": writing tensor \"big\" failed: File too large"),
      std::string::npos)
      << message;
  EXPECT_NE(message.find("nothing was written under that name"), std::string::npos);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"ck.safetensors"});  // no .tmp left
  EXPECT_EQ(read_bytes(path), before);

  // A directory that does not exist: nothing is created anywhere.
  const std::string nowhere = dir.path("no/such/dir/ck.safetensors");
  try {
    io::write_safetensors(nowhere, std::vector<io::NamedTensor>{{"x", old_tensor}});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write " + nowhere + ": creating " + nowhere +
                                         ".tmp failed: No such file or directory"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"ck.safetensors"});
}

TEST(Safetensors, WriterRejectsBadNames) {
  TempDir dir;
  const std::string path = dir.path("x.safetensors");
  Tensor t = Tensor::full({1}, 1.0f);
  EXPECT_THROW(io::write_safetensors(path, std::vector<io::NamedTensor>{{"a", t}, {"a", t}}),
               Error);
  EXPECT_THROW(io::write_safetensors(path, std::vector<io::NamedTensor>{{"__metadata__", t}}),
               Error);
  EXPECT_THROW(io::write_safetensors(path, std::vector<io::NamedTensor>{{"", t}}), Error);
  EXPECT_THROW(io::write_safetensors(
                   path, std::vector<io::NamedTensor>{{"odd", Tensor::empty({3}, DType::e2m1)}}),
               Error);
  EXPECT_TRUE(dir.entries().empty());
}

}  // namespace
}  // namespace weft::io
