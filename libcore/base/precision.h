// How a program computes, one type for every program and the weights:
//   fp32       f32 everywhere;
//   tf32       f32 storage, GEMMs on a GPU's tensor cores from inputs
//              rounded to TF32 (training);
//   bf16, fp16 16-bit activations and GEMM inputs, f32 accumulation and
//              master weights (a GPU);
//   int8       8-bit weights with a scale a row, f32 between the matrix
//              products (decoding and scoring on the CPU);
//   automatic  ("auto") bf16 on a GPU, fp32 on the CPU.
// Each job offers some of them (PrecisionChoices): parsing, the refusal of
// one a device cannot compute in, and the messages are the same everywhere.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "libcore/base/device.h"
#include "libcore/base/dtype.h"

namespace tfm {

enum class Precision { automatic, fp32, tf32, bf16, fp16, int8 };

std::string_view precision_name(Precision p);  // "auto", "fp32", ...

// The dtype activations are computed in: bf16 or f16 for those, f32 for
// fp32, tf32 and int8. `p` is resolved (not automatic).
DType compute_dtype(Precision p);

// The precisions one job offers, and the one way to read and check them.
struct PrecisionChoices {
  std::string_view job;                // the messages' verb: "trains", "decodes", "scores"
  std::span<const Precision> offered;  // in the order --help lists them

  // The offered names, for --precision's list of choices.
  std::vector<std::string> names() const;
  // `name` if offered; Error "WHAT must be auto, fp32 or int8, got 'x'" otherwise.
  Precision parse(std::string_view what, std::string_view name) const;
  // `p` for `device` (automatic: bf16 on a GPU, fp32 on the CPU), or one
  // Error when the device cannot compute in it: tf32, bf16 and fp16 need a
  // GPU, int8 is the CPU's. The Error names what the device offers instead.
  Precision resolve(Precision p, Device device) const;
};

inline constexpr Precision kTrainPrecisions[] = {Precision::automatic, Precision::fp32, Precision::tf32,
                                                 Precision::bf16, Precision::fp16};
inline constexpr Precision kDecodePrecisions[] = {Precision::automatic, Precision::fp32, Precision::int8,
                                                  Precision::bf16, Precision::fp16};
inline constexpr Precision kScorePrecisions[] = {Precision::fp32, Precision::int8};
inline constexpr PrecisionChoices kTrainPrecision{"trains", kTrainPrecisions};
inline constexpr PrecisionChoices kDecodePrecision{"decodes", kDecodePrecisions};
inline constexpr PrecisionChoices kScorePrecision{"scores", kScorePrecisions};

}  // namespace tfm
