// Encoding many documents at once: the documents are shared out over
// `threads` threads (each with its own EncodeCache), results in input order.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

namespace weft::text {

class Tokenizer;

// `done(bytes)` is called (from any thread, serialized) after each document
// with its size, for progress reports. The first error of any document is
// rethrown here, after every thread stopped.
std::vector<std::vector<int32_t>> encode_batch(const Tokenizer& tok,
                                               std::span<const std::string_view> docs, int threads,
                                               bool add_special_tokens = true,
                                               const std::function<void(size_t)>& done = {});

}  // namespace weft::text
