#include "libcore/dist/nccl.h"

#include <cstring>

#include "libcore/base/error.h"

#ifdef TFM_WITH_NCCL
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>

#include "libcore/base/cuda_check.h"
#include "libcore/base/shared_library.h"
#endif

#ifndef TFM_NCCL_LIBRARY_DIR
#define TFM_NCCL_LIBRARY_DIR "/usr/local/cuda/lib"
#endif

namespace tfm::dist {

#ifdef TFM_WITH_NCCL

namespace {

// NCCL is opened when it is first needed instead of linked (its library,
// hundreds of MB, would be mapped at every start of tfm-train, and is more
// than a process under a tight `ulimit -v` can map at all): by soname, else from
// the folder it was found in at build time. Every function tfm calls is a
// member of NcclApi of the function's own type, under its name.
#define TFM_NCCL_FUNCTIONS(X)                                                                       \
  X(ncclGetVersion) X(ncclGetUniqueId) X(ncclCommInitRankConfig) X(ncclCommGetAsyncError)           \
  X(ncclCommDestroy) X(ncclCommAbort) X(ncclAllReduce) X(ncclGetErrorString) X(ncclGetLastError)

struct NcclApi {
#define TFM_NCCL_MEMBER(name) decltype(&::name) name = nullptr;
  TFM_NCCL_FUNCTIONS(TFM_NCCL_MEMBER)
#undef TFM_NCCL_MEMBER
};

NcclApi open_nccl() {
  const std::string soname = fmt::format("libnccl.so.{}", NCCL_MAJOR);
  std::string why;
  void* library = open_shared_library(soname, TFM_NCCL_LIBRARY_DIR, why);
  if (library == nullptr)
    fail("cannot load {} ({}): GPU ranks sum their gradients with NCCL {}; install it or add its folder to "
         "LD_LIBRARY_PATH",
         soname, why, NCCL_MAJOR);
  NcclApi api;
#define TFM_NCCL_FIND(name)                                                            \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(library, #name));              \
  if (api.name == nullptr) fail("{} has no {}: not the NCCL tfm was built with", soname, #name);
  TFM_NCCL_FUNCTIONS(TFM_NCCL_FIND)
#undef TFM_NCCL_FIND
  return api;
}

// Opens NCCL on the first call (never closed). Throws Error when it cannot,
// every call alike.
const NcclApi& nccl() { return once_or_error([] { return open_nccl(); }); }

}  // namespace

bool have_nccl() { return true; }

std::string nccl_version() {
  int v = 0;
  try {
    if (nccl().ncclGetVersion(&v) != ncclSuccess) return "NCCL";
  } catch (const Error&) {
    return fmt::format("NCCL {} (not found)", NCCL_MAJOR);
  }
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
  try {
    nccl();  // every rank opens it before any waits on another
  } catch (const Error& e) {
    comm.abort(e.what());
  }
  ncclUniqueId id{};
  if (comm.rank() == 0 && nccl().ncclGetUniqueId(&id) != ncclSuccess)
    comm.abort("NCCL could not make its id (ncclGetUniqueId)");
  // The id travels as a string through the host's collective (deadline and all).
  const std::string mine(reinterpret_cast<const char*>(&id), comm.rank() == 0 ? sizeof id : 0);
  const std::string theirs = comm.all_gather(mine, "NCCL's id")[0];
  TFM_REQUIRE(theirs.size() == sizeof id, "NCCL's id came as {} bytes, not {}", theirs.size(), sizeof id);
  std::memcpy(&id, theirs.data(), sizeof id);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // every wait below keeps the deadline
  ncclComm_t communicator = nullptr;
  const ncclResult_t started =
      nccl().ncclCommInitRankConfig(&communicator, comm.size(), id, comm.rank(), &config);
  if (started != ncclSuccess && started != ncclInProgress)
    comm.abort(
        fmt::format("NCCL could not start on {}: {}", device.str(), nccl().ncclGetErrorString(started)));
  nccl_ = communicator;
  comm.wait_until(
      [&] {
        ncclResult_t state = ncclInProgress;
        nccl().ncclCommGetAsyncError(communicator, &state);
        return state != ncclInProgress;
      },
      "NCCL's start", [&] { return health(); });
}

NcclGroup::~NcclGroup() {
  if (!nccl_) return;
  ncclResult_t state = ncclSuccess;
  nccl().ncclCommGetAsyncError(nccl_of(nccl_), &state);
  if (state == ncclSuccess)
    nccl().ncclCommDestroy(nccl_of(nccl_));
  else
    nccl().ncclCommAbort(nccl_of(nccl_));
}

void NcclGroup::sum(void* data, int64_t count, DType dtype, const Stream& stream) {
  if (count == 0) return;
  const ncclResult_t r =
      nccl().ncclAllReduce(data, data, static_cast<size_t>(count), nccl_type(dtype), ncclSum, nccl_of(nccl_),
                           static_cast<cudaStream_t>(stream.native()));
  if (r == ncclInProgress) {  // a non-blocking communicator may still be queueing the call
    comm_.wait_until(
        [&] {
          ncclResult_t state = ncclInProgress;
          nccl().ncclCommGetAsyncError(nccl_of(nccl_), &state);
          return state != ncclInProgress;
        },
        "NCCL's gradient sum", [&] { return health(); });
  } else if (r != ncclSuccess) {
    comm_.abort(fmt::format("NCCL's gradient sum failed: {}", nccl().ncclGetErrorString(r)));
  }
}

std::string NcclGroup::health() const {
  ncclResult_t state = ncclSuccess;
  if (nccl().ncclCommGetAsyncError(nccl_of(nccl_), &state) != ncclSuccess) return "NCCL cannot say how it is";
  if (state == ncclSuccess || state == ncclInProgress) return {};
  return fmt::format("NCCL failed: {} ({})", nccl().ncclGetErrorString(state),
                     nccl().ncclGetLastError(nccl_of(nccl_)));
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
