#include "libcore/train/data.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "libcore/base/error.h"
#include "libcore/base/rng.h"

namespace tfm::train {
namespace {

uint64_t fnv1a(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace

std::string CorpusIdentity::str() const {
  return fmt::format("{} pairs, {} + {} tokens, vocabulary {}, digest {}", pairs, src_tokens,
                     tgt_tokens, vocab, digest);
}

BatchSource::BatchSource(const std::string& path, int64_t max_tokens)
    : path_(path), corpus_(Corpus::read(path)), max_tokens_(max_tokens) {
  TFM_REQUIRE(corpus_.size() > 0, "{} holds no sentence pairs", path);
  if (max_tokens <= 0 || max_tokens == corpus_.meta().max_tokens) {
    max_tokens_ = corpus_.meta().max_tokens;
    batches_ = corpus_.batches();
  } else {
    batches_ = corpus_.repack(max_tokens);
  }
}

HostBatch BatchSource::batch(size_t i) const {
  const BatchRange& r = batches_.at(i);
  std::vector<std::vector<int32_t>> src, tgt;
  src.reserve(r.count);
  tgt.reserve(r.count);
  for (uint32_t k = r.first; k < r.first + r.count; ++k) {
    const auto s = corpus_.src(k), t = corpus_.tgt(k);
    src.emplace_back(s.begin(), s.end());
    tgt.emplace_back(t.begin(), t.end());
  }
  return HostBatch::from_pairs(src, tgt, framing_);
}

int64_t BatchSource::target_tokens(size_t i) const {
  const BatchRange& r = batches_.at(i);
  int64_t n = 0;
  for (uint32_t k = r.first; k < r.first + r.count; ++k) n += corpus_.lengths()[k].tgt + 1;
  return n;
}

int64_t BatchSource::batch_pairs(size_t i) const { return batches_.at(i).count; }

ModelLimits BatchSource::limits() const {
  ModelLimits lim;
  lim.max_tokens = lim.max_len = 1;
  for (const BatchRange& r : batches_) {
    int64_t s = 0, t = 0;
    for (uint32_t k = r.first; k < r.first + r.count; ++k) {
      s = std::max<int64_t>(s, corpus_.lengths()[k].src + framing_.source_eos);
      t = std::max<int64_t>(t, corpus_.lengths()[k].tgt + 1);
    }
    lim.max_tokens = std::max(lim.max_tokens, std::max(s, t) * r.count);
    lim.max_len = std::max({lim.max_len, s, t});
  }
  return lim;
}

CorpusIdentity BatchSource::identity() const {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t i = 0; i < corpus_.size(); ++i) {
    const auto s = corpus_.src(i), t = corpus_.tgt(i);
    const int32_t lengths[2] = {static_cast<int32_t>(s.size()), static_cast<int32_t>(t.size())};
    h = fnv1a(h, lengths, sizeof lengths);
    h = fnv1a(h, s.data(), s.size_bytes());
    h = fnv1a(h, t.data(), t.size_bytes());
  }
  return {meta().fingerprint, static_cast<int64_t>(corpus_.size()), corpus_.src_tokens(),
          corpus_.tgt_tokens(), fmt::format("{:016x}", h)};
}

ModelLimits limits_for(const std::vector<const BatchSource*>& sources) {
  ModelLimits lim;
  lim.max_tokens = lim.max_len = 1;
  for (const BatchSource* s : sources) {
    const ModelLimits l = s->limits();
    lim.max_tokens = std::max(lim.max_tokens, l.max_tokens);
    lim.max_len = std::max(lim.max_len, l.max_len);
  }
  return lim;
}

TrainCorpora::TrainCorpora(const std::vector<std::string>& paths, int64_t max_tokens) {
  TFM_REQUIRE(!paths.empty(), "no training corpus given");
  for (const std::string& path : paths)
    sources_.push_back(std::make_unique<BatchSource>(
        path, sources_.empty() ? max_tokens : sources_.front()->max_tokens()));
}

std::vector<const BatchSource*> TrainCorpora::sources() const {
  std::vector<const BatchSource*> out;
  for (const auto& s : sources_) out.push_back(s.get());
  return out;
}

std::vector<CorpusIdentity> TrainCorpora::identities() const {
  std::vector<CorpusIdentity> out;
  for (const auto& s : sources_) out.push_back(s->identity());
  return out;
}

std::vector<size_t> TrainCorpora::sizes() const {
  std::vector<size_t> out;
  for (const auto& s : sources_) out.push_back(s->size());
  return out;
}

std::vector<uint32_t> epoch_order(size_t n, uint64_t seed, int64_t epoch) {
  TFM_REQUIRE(n < (size_t{1} << 32), "{} batches are too many to shuffle", n);
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  const RngKey key{seed, kShuffleStream, static_cast<uint32_t>(epoch)};
  for (size_t i = n; i > 1; --i) {
    // 64 random bits for j in [0, i): the modulo bias is below 2^-32.
    const Philox4 r = philox_block(key, i);
    const uint64_t bits = uint64_t{r.v[0]} << 32 | r.v[1];
    std::swap(order[i - 1], order[static_cast<size_t>(bits % i)]);
  }
  return order;
}

int64_t batches_drawn(size_t n, double weight) {
  const double whole = std::floor(weight);
  const double drawn = whole * static_cast<double>(n) + std::round((weight - whole) * static_cast<double>(n));
  TFM_REQUIRE(drawn < 0x1p32, "a weight of {} draws {} batches of {} an epoch, too many to shuffle",
              weight, drawn, n);
  return static_cast<int64_t>(drawn);
}

std::vector<uint32_t> drawn_batches(size_t n, double weight, uint32_t corpus, uint64_t seed,
                                    int64_t epoch) {
  const auto copies = static_cast<size_t>(std::floor(weight));
  const auto extra = static_cast<size_t>(batches_drawn(n, weight)) - copies * n;
  std::vector<uint32_t> out;
  out.reserve(copies * n + extra);
  for (size_t k = 0; k < copies; ++k)
    for (size_t i = 0; i < n; ++i) out.push_back(static_cast<uint32_t>(i));
  if (extra == 0) return out;
  std::vector<uint32_t> pool(n);
  std::iota(pool.begin(), pool.end(), 0u);
  const RngKey key{seed, kWeightStream, static_cast<uint32_t>(epoch)};
  for (size_t i = 0; i < extra; ++i) {
    // Draw i takes a batch from the pool's untaken tail [i, n).
    const Philox4 r = philox_block(key, uint64_t{corpus} << 32 | i);
    const uint64_t bits = uint64_t{r.v[0]} << 32 | r.v[1];
    std::swap(pool[i], pool[i + static_cast<size_t>(bits % (n - i))]);
  }
  std::sort(pool.begin(), pool.begin() + static_cast<std::ptrdiff_t>(extra));
  out.insert(out.end(), pool.begin(), pool.begin() + static_cast<std::ptrdiff_t>(extra));
  return out;
}

int64_t epoch_batches(const std::vector<size_t>& sizes, const std::vector<double>& weights) {
  TFM_REQUIRE(sizes.size() == weights.size(), "{} weights for {} training corpora", weights.size(),
              sizes.size());
  int64_t total = 0;
  for (size_t c = 0; c < sizes.size(); ++c) total += batches_drawn(sizes[c], weights[c]);
  return total;
}

std::vector<BatchRef> mixed_epoch_order(const std::vector<size_t>& sizes,
                                        const std::vector<double>& weights, uint64_t seed,
                                        int64_t epoch) {
  std::vector<BatchRef> drawn;
  drawn.reserve(static_cast<size_t>(epoch_batches(sizes, weights)));
  for (size_t c = 0; c < sizes.size(); ++c)
    for (const uint32_t b : drawn_batches(sizes[c], weights[c], static_cast<uint32_t>(c), seed, epoch))
      drawn.push_back({static_cast<uint32_t>(c), b});
  std::vector<BatchRef> order;
  order.reserve(drawn.size());
  for (const uint32_t i : epoch_order(drawn.size(), seed, epoch)) order.push_back(drawn[i]);
  return order;
}

}  // namespace tfm::train
