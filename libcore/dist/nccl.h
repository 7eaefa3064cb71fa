// NCCL over the ranks of a Comm, one GPU each (docs/guide.md, "Many GPUs
// and machines"): rank 0 makes NCCL's id, MPI carries it to the others,
// and the communicator sums gradients in place on a CUDA stream, in the
// stream's order (the host does not wait). The communicator is
// non-blocking, so its start and every wait keep the Comm's deadline; an
// error NCCL finds on its own (a peer gone) is read by health().
#pragma once

#include <cstdint>
#include <string>

#include "libcore/base/device.h"
#include "libcore/base/dtype.h"
#include "libcore/base/stream.h"
#include "libcore/dist/comm.h"

namespace tfm::dist {

// Whether this build has NCCL (with CUDA), and its version
// ("NCCL 2.28.9"; empty without).
bool have_nccl();
std::string nccl_version();

class NcclGroup {
 public:
  // Every rank of `comm` calls this with its own GPU. Error in a build
  // without NCCL.
  NcclGroup(Comm& comm, Device device);
  ~NcclGroup();  // aborts the communicator if an error left it in use
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

  // data (count elements of dtype, f32 or f64) summed over the ranks, in
  // place, queued on `stream`.
  void sum(void* data, int64_t count, DType dtype, const Stream& stream);
  // Empty while the communicator is well; otherwise what NCCL reports.
  std::string health() const;

 private:
  Comm& comm_;
  void* nccl_ = nullptr;  // ncclComm_t
};

}  // namespace tfm::dist
