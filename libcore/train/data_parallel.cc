#include "libcore/train/data_parallel.h"

#include <algorithm>

#include "libcore/dist/nccl.h"
#include "libcore/model/layers.h"

namespace tfm::train {

Share share_of(size_t update_batches, int rank, int ranks, int64_t update_freq) {
  TFM_REQUIRE(ranks >= 1 && rank >= 0 && rank < ranks && update_freq >= 1,
              "internal: rank {} of {} with --update-freq {}", rank, ranks, update_freq);
  const size_t f = static_cast<size_t>(update_freq);
  const size_t first = std::min(update_batches, static_cast<size_t>(rank) * f);
  return {first, std::min(update_batches, first + f) - first};
}

GradientReducer::GradientReducer(dist::Comm& comm, Transformer& model, size_t bucket_bytes)
    : comm_(comm), model_(model) {
  TFM_REQUIRE(bucket_bytes > 0, "internal: empty gradient buckets");
  // Consecutive pieces of backward's order fill a bucket up to
  // bucket_bytes; pieces that lie side by side in the buffer (the layers
  // of a stack) merge into one range, so a bucket is one or two sums.
  const std::vector<GradientPiece> order = model.gradient_order();
  const size_t el = dtype_size(model.grads().dtype());
  Bucket b;
  size_t bytes = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const GradientPiece p = order[i];
    if (!b.ranges.empty() && b.ranges.back().begin == p.end)
      b.ranges.back().begin = p.begin;  // backward walks a stack downwards
    else if (!b.ranges.empty() && b.ranges.back().end == p.begin)
      b.ranges.back().end = p.end;
    else
      b.ranges.push_back(p);
    b.last_piece = static_cast<int>(i);
    bytes += static_cast<size_t>(p.end - p.begin) * el;
    if (bytes >= bucket_bytes || i + 1 == order.size()) {
      buckets_.push_back(std::move(b));
      b = Bucket{};
      bytes = 0;
    }
  }
  if (model.device().is_cuda()) {
    nccl_ = std::make_unique<dist::NcclGroup>(comm, model.device());
    comm_stream_ = std::make_unique<Stream>(model.device());
    for (size_t i = 0; i <= buckets_.size(); ++i)
      ready_events_.push_back(std::make_unique<Event>(model.device()));
    done_ = std::make_unique<Event>(model.device());
  }
}

GradientReducer::~GradientReducer() {
  // The sums may still be queued on NCCL's stream: let them land first.
  if (comm_stream_) try { comm_stream_->synchronize(); } catch (...) {}
}

void GradientReducer::start(size_t i) {
  const Bucket& b = buckets_[i];
  const TensorView grads = model_.grads();
  const size_t el = dtype_size(grads.dtype());
  char* base = static_cast<char*>(grads.data());
  if (nccl_) {
    // NCCL's stream waits for backward to reach this point, no more.
    Event& e = *ready_events_[i];
    e.record(model_.stream());
    e.wait(*comm_stream_);
    for (const GradientPiece& r : b.ranges)
      nccl_->sum(base + static_cast<size_t>(r.begin) * el, r.end - r.begin, grads.dtype(), *comm_stream_);
    return;
  }
  for (const GradientPiece& r : b.ranges)
    comm_.start_sum(base + static_cast<size_t>(r.begin) * el, r.end - r.begin, grads.dtype());
  comm_.progress();
}

void GradientReducer::ready(int piece) {
  if (next_ < buckets_.size() && buckets_[next_].last_piece == piece)
    start(next_++);
  else
    comm_.progress();
}

void GradientReducer::finish() {
  while (next_ < buckets_.size()) start(next_++);
  // The update's {loss, nll}: the first two of its sums.
  const TensorView sums = model::prefix(model_.update_sums(), {2});
  if (nccl_) {
    Event& e = *ready_events_.back();
    e.record(model_.stream());
    e.wait(*comm_stream_);
    nccl_->sum(sums.data(), 2, sums.dtype(), *comm_stream_);
    done_->record(*comm_stream_);
    done_->wait(model_.stream());  // Adam and the next update come after the sums
  } else {
    comm_.start_sum(sums.data(), 2, sums.dtype());
    comm_.finish_sums("the gradient sum of an update");
  }
  next_ = 0;
}

std::string GradientReducer::health() const { return nccl_ ? nccl_->health() : std::string(); }

}  // namespace tfm::train
