#include "weft/parallel/overlap/config.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <mutex>

#include "weft/core/error.h"

namespace weft::parallel {

OverlapMethod parse_overlap_method(std::string_view s, std::string_view where) {
  if (s == "off") return OverlapMethod::off;
  if (s == "ring") return OverlapMethod::ring;
  if (s == "pipeline") return OverlapMethod::pipeline;
  if (s == "bulk") return OverlapMethod::bulk;
  WEFT_FAIL("overlap {}: unknown method '{}': use ring, pipeline, bulk or off", where, s);
}

void check_overlap_gemm_name(const std::string& name) {
  for (const std::string& n : overlap_gemm_names()) {
    if (n == name) return;
  }
  WEFT_FAIL(
      "overlap: unknown GEMM '{}': use <layer>_<pass> with layer qkv, proj, fc1 or fc2 and pass "
      "fprop, dgrad or wgrad (e.g. fc2_fprop)",
      name);
}

namespace {

int parse_int(std::string_view s, std::string_view where, const char* what, int lo) {
  int n = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  WEFT_CHECK(ec == std::errc() && p == s.data() + s.size() && n >= lo && n <= 1024,
             "overlap {}: {} '{}' is not an integer in [{}, 1024]", where, what, s, lo);
  return n;
}

}  // namespace

namespace {
std::mutex g_notes_mu;
std::vector<std::string> g_notes;
}  // namespace

void note_overlap_fallback(const std::string& gemm, OverlapMethod method, const char* why) {
  const std::string note =
      format("overlap {}={} does not apply here: {}; it runs without overlap",
             gemm.empty() ? "(unnamed GEMM)" : gemm, overlap_method_name(method), why);
  std::lock_guard<std::mutex> lock(g_notes_mu);
  if (std::find(g_notes.begin(), g_notes.end(), note) != g_notes.end()) return;
  g_notes.push_back(note);
  std::fprintf(stderr, "weft: %s\n", note.c_str());
}

std::vector<std::string> overlap_fallback_notes() {
  std::lock_guard<std::mutex> lock(g_notes_mu);
  return g_notes;
}

const char* overlap_method_name(OverlapMethod m) {
  switch (m) {
    case OverlapMethod::off: return "off";
    case OverlapMethod::ring: return "ring";
    case OverlapMethod::pipeline: return "pipeline";
    case OverlapMethod::bulk: return "bulk";
  }
  return "?";
}

const std::vector<std::string>& overlap_gemm_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const char* layer : {"qkv", "proj", "fc1", "fc2"}) {
      for (const char* pass : {"fprop", "dgrad", "wgrad"}) {
        v.push_back(std::string(layer) + "_" + pass);
      }
    }
    return v;
  }();
  return names;
}

OverlapConfig OverlapConfig::defaults() {
  OverlapConfig c;
  c.enabled_ = true;
  for (const std::string& n : overlap_gemm_names()) c.choices_[n] = {};
  for (const char* n : {"qkv_fprop", "fc1_fprop", "proj_dgrad", "fc2_dgrad"}) {
    c.choices_[n] = {OverlapMethod::ring, 4};
  }
  for (const char* n : {"proj_fprop", "fc2_fprop"}) c.choices_[n] = {OverlapMethod::pipeline, 4};
  for (const char* n : {"qkv_dgrad", "fc1_dgrad", "qkv_wgrad", "fc1_wgrad"}) {
    c.choices_[n] = {OverlapMethod::bulk, 4};
  }
  return c;
}

OverlapConfig OverlapConfig::none() {
  OverlapConfig c;
  c.enabled_ = true;
  for (const std::string& n : overlap_gemm_names()) c.choices_[n] = {};
  return c;
}

OverlapConfig OverlapConfig::parse(std::string_view text) {
  if (text.empty() || text == "off") return {};
  if (text == "none") return none();
  OverlapConfig c = defaults();
  if (text == "on" || text == "default") return c;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view item = text.substr(start, end - start);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) {
      const size_t eq = item.find('=');
      WEFT_CHECK(eq != std::string_view::npos,
                 "overlap: '{}' is not <gemm>=<method>[:num_splits] (e.g. fc2_fprop=pipeline:4), "
                 "on, off or a JSON file",
                 item);
      const std::string name(item.substr(0, eq));
      if (name == "comm_cores") {
        c.comm_cores_ = parse_int(item.substr(eq + 1), name, "value", 0);
        start = end + 1;
        continue;
      }
      check_overlap_gemm_name(name);
      std::string_view rhs = item.substr(eq + 1);
      OverlapChoice choice;
      const size_t colon = rhs.find(':');
      choice.method = parse_overlap_method(rhs.substr(0, colon), name);
      if (colon != std::string_view::npos)
        choice.num_splits = parse_int(rhs.substr(colon + 1), name, "num_splits", 1);
      c.choices_[name] = choice;
    }
    start = end + 1;
  }
  return c;
}

OverlapChoice OverlapConfig::choice(const std::string& gemm) const {
  if (!enabled_) return {};
  auto it = choices_.find(gemm);
  OverlapChoice c = it == choices_.end() ? OverlapChoice{} : it->second;
  c.comm_cores = comm_cores_;
  return c;
}

void OverlapConfig::set_comm_cores(int n) {
  WEFT_CHECK(n >= 0 && n <= 1024, "overlap: comm_cores {} is not an integer in [0, 1024]", n);
  comm_cores_ = n;
}

void OverlapConfig::set(const std::string& gemm, OverlapChoice c) {
  check_overlap_gemm_name(gemm);
  enabled_ = true;
  choices_[gemm] = c;
}

std::string OverlapConfig::str() const {
  if (!enabled_) return "off";
  std::string out;
  for (const std::string& n : overlap_gemm_names()) {
    const OverlapChoice c = choice(n);
    if (!out.empty()) out += ",";
    out += n + "=" + overlap_method_name(c.method);
    if (c.method == OverlapMethod::pipeline) out += ":" + std::to_string(c.num_splits);
  }
  if (comm_cores_ != 0) out += ",comm_cores=" + std::to_string(comm_cores_);
  return out;
}

}  // namespace weft::parallel
