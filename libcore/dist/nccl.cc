#include "libcore/dist/nccl.h"

#include <cstring>

#include "libcore/error.h"

#ifdef TFM_WITH_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

#include "kernels/cuda/check.h"
#endif

namespace tfm::dist {

#ifdef TFM_WITH_NCCL

bool have_nccl() { return true; }

std::string nccl_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "NCCL";
  return fmt::format("NCCL {}.{}.{}", v / 10000, v / 100 % 100, v % 100);
}

namespace {

ncclComm_t nccl_of(void* p) { return static_cast<ncclComm_t>(p); }

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::f32: return ncclFloat32;
    case DType::f64: return ncclFloat64;
    default: fail("a gradient sum of {} is not supported (f32 or f64)", dtype_name(t));
  }
}

}  // namespace

NcclGroup::NcclGroup(Comm& comm, Device device) : comm_(comm) {
  TFM_REQUIRE(device.is_cuda(), "NCCL sums on GPUs; this rank runs on {}", device.str());
  activate(device);
  ncclUniqueId id{};
  if (comm.rank() == 0 && ncclGetUniqueId(&id) != ncclSuccess)
    comm.abort("NCCL could not make its id (ncclGetUniqueId)");
  // The id travels as a string through the host's collective (deadline and all).
  const std::string mine(reinterpret_cast<const char*>(&id), comm.rank() == 0 ? sizeof id : 0);
  const std::string theirs = comm.all_gather(mine, "NCCL's id")[0];
  TFM_REQUIRE(theirs.size() == sizeof id, "NCCL's id came as {} bytes, not {}", theirs.size(), sizeof id);
  std::memcpy(&id, theirs.data(), sizeof id);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // every wait below keeps the deadline
  ncclComm_t nccl = nullptr;
  const ncclResult_t started = ncclCommInitRankConfig(&nccl, comm.size(), id, comm.rank(), &config);
  if (started != ncclSuccess && started != ncclInProgress)
    comm.abort(fmt::format("NCCL could not start on {}: {}", device.str(), ncclGetErrorString(started)));
  nccl_ = nccl;
  comm.wait_until(
      [&] {
        ncclResult_t state = ncclInProgress;
        ncclCommGetAsyncError(nccl, &state);
        return state != ncclInProgress;
      },
      "NCCL's start", [&] { return health(); });
}

NcclGroup::~NcclGroup() {
  if (!nccl_) return;
  ncclResult_t state = ncclSuccess;
  ncclCommGetAsyncError(nccl_of(nccl_), &state);
  if (state == ncclSuccess)
    ncclCommDestroy(nccl_of(nccl_));
  else
    ncclCommAbort(nccl_of(nccl_));
}

void NcclGroup::sum(void* data, int64_t count, DType dtype, const Stream& stream) {
  if (count == 0) return;
  const ncclResult_t r = ncclAllReduce(data, data, static_cast<size_t>(count), nccl_type(dtype), ncclSum,
                                       nccl_of(nccl_), static_cast<cudaStream_t>(stream.native()));
  if (r == ncclInProgress) {  // a non-blocking communicator may still be queueing the call
    comm_.wait_until(
        [&] {
          ncclResult_t state = ncclInProgress;
          ncclCommGetAsyncError(nccl_of(nccl_), &state);
          return state != ncclInProgress;
        },
        "NCCL's gradient sum", [&] { return health(); });
  } else if (r != ncclSuccess) {
    comm_.abort(fmt::format("NCCL's gradient sum failed: {}", ncclGetErrorString(r)));
  }
}

std::string NcclGroup::health() const {
  ncclResult_t state = ncclSuccess;
  if (ncclCommGetAsyncError(nccl_of(nccl_), &state) != ncclSuccess) return "NCCL cannot say how it is";
  if (state == ncclSuccess || state == ncclInProgress) return {};
  return fmt::format("NCCL failed: {} ({})", ncclGetErrorString(state), ncclGetLastError(nccl_of(nccl_)));
}

#else

bool have_nccl() { return false; }
std::string nccl_version() { return {}; }

NcclGroup::NcclGroup(Comm& comm, Device) : comm_(comm) {
  fail("this tfm was built without NCCL (it needs CUDA and NCCL at build time): GPU ranks cannot "
       "sum their gradients");
}
NcclGroup::~NcclGroup() = default;
void NcclGroup::sum(void*, int64_t, DType, const Stream&) {}
std::string NcclGroup::health() const { return {}; }

#endif

}  // namespace tfm::dist
