// optimizer_fixture KEY=VALUE...: tfm-train's optimizer and learning-rate
// schedule, as its options (libcore/train/options.h: lr-schedule, lr,
// lr-scale, min-lr, warmup, decay-steps, max-steps, adam-beta1, adam-beta2,
// adam-eps, weight-decay) configure them, run for max-steps updates of 64
// f64 parameters on the CPU with gradients of a fixed formula, printed as
// one JSON object for optimizer_vs_pytorch.py:
//   {"lr": [the schedule's rate of each update], "beta1": ..., "beta2": ...,
//    "eps": ..., "weight_decay": ... (as the kernel reads them: f32),
//    "params": [[the parameters after each update]]}
// p0[i] = cos(0.11 i); the gradient of update t (1-based) g[i] = sin(0.37 i
// + 1.3 t) + 0.1.
#include <cmath>
#include <cstdio>
#include <string>

#include "libcore/base/stream.h"
#include "libcore/base/tensor.h"
#include "libcore/train/options.h"
#include "libcore/train/optimizer.h"

using namespace tfm;

int main(int argc, char** argv) try {
  train::TrainOptions o;
  o.lr_schedule = LrSchedule::noam;
  o.max_steps = 30;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    const size_t eq = arg.find('=');
    if (eq == std::string::npos) throw Error("arguments are KEY=VALUE, got '" + arg + "'");
    o.set(arg.substr(0, eq), arg.substr(eq + 1));
  }
  const int64_t P = 64, d_model = 32;
  Stream cpu(Device::cpu());
  Tensor params({P}, DType::f64), grads({P}, DType::f64);
  for (int64_t i = 0; i < P; ++i) params.data_as<double>()[i] = std::cos(0.11 * static_cast<double>(i));
  const AdamConfig config = o.adam();
  Adam adam({P}, DType::f64, cpu, config);
  const ScheduleConfig schedule = o.schedule(d_model);
  std::string lrs, steps;
  for (int64_t t = 1; t <= o.max_steps; ++t) {
    for (int64_t i = 0; i < P; ++i)
      grads.data_as<double>()[i] = std::sin(0.37 * static_cast<double>(i) + 1.3 * static_cast<double>(t)) + 0.1;
    const double lr = learning_rate(schedule, t);
    adam.step(params, grads, lr, t, 1.0f, cpu);
    lrs += fmt::format("{}{:.17g}", t > 1 ? "," : "", lr);
    steps += t > 1 ? ",[" : "[";
    for (int64_t i = 0; i < P; ++i) steps += fmt::format("{}{:.17g}", i ? "," : "", params.data_as<double>()[i]);
    steps += "]";
  }
  std::printf("{\"lr\":[%s],\"beta1\":%.17g,\"beta2\":%.17g,\"eps\":%.17g,\"weight_decay\":%.17g,"
              "\"params\":[%s]}\n",
              lrs.c_str(), static_cast<double>(config.beta1), static_cast<double>(config.beta2),
              static_cast<double>(config.eps), static_cast<double>(config.weight_decay), steps.c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "optimizer_fixture: error: %s\n", e.what());
  return 1;
}
