#include "weft/text/bpe.h"

#include <cstdio>
#include <queue>

#include "weft/text/json_util.h"
#include "weft/text/unicode.h"

namespace weft::text {

using detail::get;
using detail::get_or;

Bpe::Bpe(const nlohmann::json& spec) {
  const std::string what = "the BPE model";
  const auto type = detail::type_of(spec, "the model");
  WEFT_CHECK(
      type == "BPE",
      "tokenizer.json: the model {} is not supported by weft (it reads BPE models; WordPiece, "
      "Unigram and WordLevel are not)",
      type);
  for (const char* refused : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    WEFT_CHECK(!spec.contains(refused) || spec.at(refused).is_null() ||
                   (spec.at(refused).is_string() && spec.at(refused).get<std::string>().empty()),
               "tokenizer.json: the BPE model sets {}, which weft does not support", refused);
  }
  WEFT_CHECK(!spec.contains("dropout") || spec.at("dropout").is_null() ||
                 (spec.at("dropout").is_number() && spec.at("dropout").get<double>() == 0.0),
             "tokenizer.json: the BPE model sets dropout, which weft does not support (encoding "
             "would be random); set it to null");
  const auto& vocab = detail::field(spec, "vocab", what);
  WEFT_CHECK(vocab.is_object(), "tokenizer.json: the BPE model's vocab is not an object");
  vocab_.reserve(vocab.size());
  int64_t max_id = -1;
  for (const auto& [token, id] : vocab.items()) {
    WEFT_CHECK(
        id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < (int64_t{1} << 31),
        "tokenizer.json: the vocab entry '{}' has the id {}, not an id in [0, 2^31)", token,
        id.dump());
    vocab_[token] = static_cast<int32_t>(id.get<int64_t>());
    max_id = std::max(max_id, id.get<int64_t>());
  }
  // Ids index a table: they must be about as many as the tokens.
  WEFT_CHECK(max_id < 2 * static_cast<int64_t>(vocab_.size()) + 65536,
             "tokenizer.json: the vocab has {} tokens but ids up to {}; weft reads vocabularies "
             "whose ids are dense",
             vocab_.size(), max_id);
  tokens_.resize(static_cast<size_t>(max_id + 1));
  for (const auto& [token, id] : vocab_) tokens_[static_cast<size_t>(id)] = token;

  const auto& merges = detail::field(spec, "merges", what);
  WEFT_CHECK(merges.is_array(), "tokenizer.json: the BPE model's merges is not a list");
  merges_.reserve(merges.size());
  int32_t rank = 0;
  for (const auto& m : merges) {
    std::string a, b;
    if (m.is_string()) {
      const auto s = m.get<std::string>();
      const size_t sp = s.find(' ');
      WEFT_CHECK(sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos,
                 "tokenizer.json: the merge '{}' is not two tokens separated by one space", s);
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else {
      WEFT_CHECK(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(),
                 "tokenizer.json: the merge {} is not a pair of tokens", m.dump());
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    }
    auto ia = vocab_.find(a), ib = vocab_.find(b), ic = vocab_.find(a + b);
    WEFT_CHECK(ia != vocab_.end() && ib != vocab_.end(),
               "tokenizer.json: the merge '{} {}' names a token the vocab does not have", a, b);
    WEFT_CHECK(ic != vocab_.end(),
               "tokenizer.json: the merge '{} {}' makes '{}', which the vocab does not have", a, b,
               a + b);
    merges_[key(ia->second, ib->second)] = Merge{rank++, ic->second};
  }
  if (spec.contains("unk_token") && !spec.at("unk_token").is_null()) {
    const auto unk = get<std::string>(spec, "unk_token", what);
    auto it = vocab_.find(unk);
    WEFT_CHECK(it != vocab_.end(), "tokenizer.json: the unk_token '{}' is not in the vocab", unk);
    unk_ = it->second;
  }
  fuse_unk_ = get_or<bool>(spec, "fuse_unk", false, what);
  byte_fallback_ = get_or<bool>(spec, "byte_fallback", false, what);
  ignore_merges_ = get_or<bool>(spec, "ignore_merges", false, what);
  all_bytes_ = true;
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto it = vocab_.find(std::string_view(name, 6));
    byte_ids_[b] = it == vocab_.end() ? -1 : it->second;
    if (byte_ids_[b] < 0) all_bytes_ = false;
  }
}

std::optional<int32_t> Bpe::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string& Bpe::id_to_token(int32_t id) const {
  static const std::string empty;
  return id >= 0 && id < size() ? tokens_[static_cast<size_t>(id)] : empty;
}

void Bpe::tokenize(std::string_view w, std::vector<int32_t>& out) const {
  if (w.empty()) return;
  if (ignore_merges_) {
    if (auto it = vocab_.find(w); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  // Symbols: id and a doubly linked list (prev/next), len 0 once merged away.
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    uint32_t len;
  };
  std::vector<Symbol> syms;
  syms.reserve(w.size());
  auto add = [&](int32_t id, size_t len) {
    const auto n = static_cast<int32_t>(syms.size());
    syms.push_back({id, n - 1, -1, static_cast<uint32_t>(len)});
    if (n > 0) syms[static_cast<size_t>(n - 1)].next = n;
  };
  bool have_unk = false;
  size_t unk_len = 0;
  for (size_t i = 0; i < w.size();) {
    const size_t len = char_len(static_cast<unsigned char>(w[i]));
    auto it = vocab_.find(w.substr(i, len));
    if (it != vocab_.end()) {
      if (have_unk) {
        add(*unk_, unk_len);
        have_unk = false;
      }
      add(it->second, len);
    } else {
      bool fell_back = false;
      if (byte_fallback_) {
        bool ok = true;
        for (size_t k = 0; k < len; ++k)
          ok = ok && byte_ids_[static_cast<unsigned char>(w[i + k])] >= 0;
        if (ok) {
          for (size_t k = 0; k < len; ++k) add(byte_ids_[static_cast<unsigned char>(w[i + k])], 1);
          fell_back = true;
        }
      }
      if (!fell_back && unk_) {
        if (have_unk && fuse_unk_) {
          unk_len += len;
        } else {
          if (have_unk) add(*unk_, unk_len);
          have_unk = true;
          unk_len = len;
        }
      }
    }
    i += len;
  }
  if (have_unk) add(*unk_, unk_len);

  struct Cand {
    int32_t rank, pos, id;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> queue;
  for (size_t k = 0; k + 1 < syms.size(); ++k)
    if (const Merge* m = merge(syms[k].id, syms[k + 1].id))
      queue.push({m->rank, static_cast<int32_t>(k), m->id});
  while (!queue.empty()) {
    const Cand top = queue.top();
    queue.pop();
    Symbol& cur = syms[static_cast<size_t>(top.pos)];
    if (cur.len == 0 || cur.next == -1) continue;
    const Symbol right = syms[static_cast<size_t>(cur.next)];
    const Merge* m = merge(cur.id, right.id);
    if (!m || m->id != top.id) continue;
    const int32_t next_pos = cur.next;
    cur.id = top.id;
    cur.len += right.len;
    cur.next = right.next;
    syms[static_cast<size_t>(next_pos)].len = 0;
    if (right.next > -1) syms[static_cast<size_t>(right.next)].prev = top.pos;
    if (cur.prev >= 0) {
      if (const Merge* pm = merge(syms[static_cast<size_t>(cur.prev)].id, cur.id))
        queue.push({pm->rank, cur.prev, pm->id});
    }
    if (cur.next >= 0) {
      if (const Merge* nm = merge(cur.id, syms[static_cast<size_t>(cur.next)].id))
        queue.push({nm->rank, top.pos, nm->id});
    }
  }
  for (const auto& s : syms)
    if (s.len != 0) out.push_back(s.id);
}

}  // namespace weft::text
