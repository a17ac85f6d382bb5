#include "weft/text/batch.h"

#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

#include "weft/text/tokenizer.h"

namespace weft::text {

std::vector<std::vector<int32_t>> encode_batch(const Tokenizer& tok,
                                               std::span<const std::string_view> docs, int threads,
                                               bool add_special_tokens,
                                               const std::function<void(size_t)>& done) {
  std::vector<std::vector<int32_t>> out(docs.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex mu;
  auto work = [&] {
    EncodeCache cache;
    for (;;) {
      const size_t i = next.fetch_add(1);
      if (i >= docs.size() || failed.load()) return;
      try {
        out[i] = tok.encode(docs[i], add_special_tokens, &cache);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
        failed = true;
        return;
      }
      if (done) {
        std::lock_guard<std::mutex> lock(mu);
        done(docs[i].size());
      }
    }
  };
  const int n = std::max(1, std::min<int>(threads, static_cast<int>(docs.size())));
  std::vector<std::thread> pool;
  for (int t = 1; t < n; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
  return out;
}

}  // namespace weft::text
