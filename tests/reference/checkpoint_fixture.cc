// Writes a checkpoint with known contents to argv[1], for the independent
// Python reader (checkpoint_reader.sh checks every field against the same
// list, written out there a second time). Every value is exact in its dtype.
//
//   config     "d_model = 512\nheads = 8\nname = \"Grüße\"\n"
//   tokenizer  bytes 0, 1, ..., 255, four times
//   tensors    scalar.f32  f32  ()                  1.5
//              vec.f64     f64  (5)                 i * 0.5 - 1
//              mat.bf16    bf16 (3, 4)              i * 0.25 - 1
//              cube.f16    f16  (2, 3, 4)           i * 0.125 - 1
//              ids.i32     i32  (2, 2, 2, 2)        i * 1000 - 7000
//              r5.f32      f32  (1, 2, 1, 3, 1)     i - 2
//              r6.f32      f32  (2, 1, 2, 1, 2, 1)  i * 0.5
//              empty.f32   f32  (0, 7)
//              big.f32     f32  (1000, 600)         (i % 1013) * 0.5
//   sections   train.state "step = 1234\n", empty ""
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "libcore/base/error.h"
#include "libcore/io/checkpoint.h"

using namespace tfm;

namespace {

template <typename T, typename F>
io::CheckpointTensor filled(std::string name, Shape shape, F value) {
  io::CheckpointTensor t{std::move(name), dtype_of<T>, shape, {}};
  t.data.resize(static_cast<size_t>(shape.numel()) * sizeof(T));
  for (int64_t i = 0; i < shape.numel(); ++i) {
    const T v = value(i);
    std::memcpy(t.data.data() + static_cast<size_t>(i) * sizeof(T), &v, sizeof(T));
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: checkpoint_fixture OUT\n");
    return 2;
  }
  try {
    io::Checkpoint c;
    c.config = "d_model = 512\nheads = 8\nname = \"Gr\xc3\xbc\xc3\x9f" "e\"\n";
    for (int r = 0; r < 4; ++r)
      for (int b = 0; b < 256; ++b) c.tokenizer.push_back(static_cast<char>(b));
    c.tensors.push_back(filled<float>("scalar.f32", Shape{}, [](int64_t) { return 1.5f; }));
    c.tensors.push_back(filled<double>("vec.f64", Shape{5}, [](int64_t i) { return i * 0.5 - 1; }));
    c.tensors.push_back(filled<bf16>("mat.bf16", Shape{3, 4},
                                     [](int64_t i) { return bf16(i * 0.25f - 1); }));
    c.tensors.push_back(filled<f16>("cube.f16", Shape{2, 3, 4},
                                    [](int64_t i) { return f16(i * 0.125f - 1); }));
    c.tensors.push_back(filled<int32_t>("ids.i32", Shape{2, 2, 2, 2},
                                        [](int64_t i) { return static_cast<int32_t>(i * 1000 - 7000); }));
    c.tensors.push_back(filled<float>("r5.f32", Shape{1, 2, 1, 3, 1},
                                      [](int64_t i) { return static_cast<float>(i - 2); }));
    c.tensors.push_back(filled<float>("r6.f32", Shape{2, 1, 2, 1, 2, 1},
                                      [](int64_t i) { return static_cast<float>(i) * 0.5f; }));
    c.tensors.push_back(filled<float>("empty.f32", Shape{0, 7}, [](int64_t) { return 0.0f; }));
    c.tensors.push_back(filled<float>("big.f32", Shape{1000, 600},
                                      [](int64_t i) { return static_cast<float>(i % 1013) * 0.5f; }));
    c.sections = {{"train.state", "step = 1234\n"}, {"empty", ""}};
    io::write_checkpoint(argv[1], c);
  } catch (const Error& e) {
    std::fprintf(stderr, "checkpoint_fixture: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
