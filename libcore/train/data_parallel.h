// Data-parallel training (docs/guide.md, "Many GPUs and machines"): every
// rank runs the same model on its share of each update's batches, and the
// ranks' gradients are summed into every rank's before the optimizer step,
// so every rank applies the same update and the parameters never part.
//
// An update of K ranks with --update-freq F takes the next K x F batches of
// the global order, rank r the F from r x F; the loss is normalized by the
// target tokens of all K x F batches (every rank knows them: the corpus
// and the order are the same everywhere), and batch i of the update draws
// its dropout from the update's counter + i. So K ranks train as one
// process with --update-freq K x F, up to the order of the sums.
//
// The sum runs in buckets of about --bucket-mb, each started as soon as
// backward has completed every piece of the gradient in it
// (Transformer::gradient_order), so that it overlaps the rest of backward:
// on GPUs by NCCL on a stream of its own, on the CPU by MPI.
//
// Before the first update the ranks agree on the run they set up, and at
// every update on whether to stop (ranks.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "libcore/dist/comm.h"
#include "libcore/model/transformer.h"

namespace tfm::dist {
class NcclGroup;  // dist/nccl.h
}

namespace tfm::train {

class GradientReducer final : public GradientSink {
 public:
  GradientReducer(dist::Comm& comm, Transformer& model, size_t bucket_bytes);
  ~GradientReducer() override;
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // From backward (the update's last batch): a piece is final.
  void ready(int piece) override;
  // After the update's last batch, or in its place on a rank that had no
  // batch: starts the buckets backward did not, sums the update's loss
  // sums too, and puts the model's stream behind all of it (the CPU waits
  // for the sums here; a GPU's host does not).
  void finish();

  size_t buckets() const { return buckets_.size(); }
  bool on_gpu() const { return nccl_ != nullptr; }
  // Empty, or what NCCL reports is wrong (for the host's waits).
  std::string health() const;

 private:
  struct Bucket {
    std::vector<GradientPiece> ranges;  // contiguous pieces merged
    int last_piece = 0;                 // the piece whose completion starts it
  };
  void start(size_t bucket);

  dist::Comm& comm_;
  Transformer& model_;
  std::vector<Bucket> buckets_;
  size_t next_ = 0;  // buckets started in this update
  std::unique_ptr<dist::NcclGroup> nccl_;
  std::unique_ptr<Stream> comm_stream_;  // NCCL's stream
  std::vector<std::unique_ptr<Event>> ready_events_;  // one a bucket, then finish()'s
  std::unique_ptr<Event> done_;
};

// Which batches of an update a rank trains on: of `update_batches` (K x F
// in global order), rank r of K takes [r x F, (r + 1) x F) (fewer, or none,
// when the last update of a run is short).
struct Share {
  size_t first = 0, count = 0;
};
Share share_of(size_t update_batches, int rank, int ranks, int64_t update_freq);

}  // namespace tfm::train
