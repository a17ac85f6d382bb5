// Choosing the next token from a vocabulary's logits: greedy (temperature 0)
// or sampled from the softmax at a temperature, restricted to the top-k
// tokens and then to the smallest set of them whose probability reaches
// top-p (nucleus sampling). Deterministic for a seed on every platform: the
// numbers come from splitmix64 (std:: distributions differ between standard
// libraries), one per sampled token, and the candidates are ordered by a
// total order (logit, then id).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace weft::infer {

struct Sampling {
  float temperature = 0.8f;  // 0: greedy (the most likely token, no number drawn)
  int64_t top_k = 40;        // sample among the k most likely tokens (0: all)
  float top_p = 1.0f;        // then among the fewest of them holding this probability (1: all)
};

// Throws weft::Error naming the option (--temperature, --top-k, --top-p)
// that is out of range.
void check(const Sampling& s);

class Sampler {
 public:
  Sampler(Sampling sampling, uint64_t seed);
  // The token chosen from logits over the vocabulary (one per id).
  int32_t next(std::span<const float> logits);

 private:
  double uniform();

  Sampling sampling_;
  uint64_t state_;
  std::vector<int32_t> order_;  // reused: no allocation per token
  std::vector<double> weight_;
};

}  // namespace weft::infer
