// The core types: device parsing and selection, shapes and views, 16-bit
// float conversion, memory plans, errors for a build without CUDA.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstring>
#include <thread>

#include "kernels/ops.h"
#include "libcore/base/memory.h"
#include "libcore/base/phases.h"
#include "tests/support.h"

using namespace tfm;

TEST_CASE("device names parse, and bad ones say what is allowed", "[device]") {
  using Kind = DeviceRequest::Kind;
  CHECK(parse_device("auto").kind == Kind::automatic);
  CHECK(parse_device("cpu").kind == Kind::cpu);
  CHECK(parse_device("cuda").kind == Kind::cuda);
  CHECK(parse_device("cuda").index == -1);
  CHECK(parse_device("cuda:3").index == 3);
  for (const char* bad : {"", "gpu", "cuda:", "cuda:-1", "cuda:1x", "CPU", "cuda:99999999999"})
    REQUIRE_THROWS_WITH(parse_device(bad), Catch::Contains("expected auto, cpu, cuda or cuda:N"));
  CHECK(Device::cuda(2).str() == "cuda:2");
  CHECK(Device::cpu().str() == "cpu");
}

TEST_CASE("device selection falls back to the CPU only when asked to choose", "[device]") {
  CHECK(select_device(parse_device("cpu")) == Device::cpu());
  if (cuda_usable()) {
    CHECK(select_device(parse_device("auto")) == Device::cuda(0));
    const int count = static_cast<int>(cuda_status().devices.size());
    REQUIRE_THROWS_WITH(select_device({DeviceRequest::Kind::cuda, count}),
                        Catch::Contains("does not exist"));
  } else {
    CHECK(select_device(parse_device("auto")) == Device::cpu());
    REQUIRE_THROWS_WITH(select_device(parse_device("cuda:0")),
                        cuda_status().compiled ? Catch::Contains("is not usable")
                                               : Catch::Contains("built without CUDA"));
    CHECK_FALSE(cuda_status().why_none.empty());
  }
}

TEST_CASE("a build without CUDA answers a CUDA request with one sentence", "[device]") {
  if (cuda_status().compiled) return;  // covered by the CPU-only (sanitizer) build
  REQUIRE_THROWS_WITH(Stream(Device::cuda(0)),
                      Catch::Equals("unsupported device: cuda (built without CUDA)"));
  REQUIRE_THROWS_WITH(Tensor({4}, DType::f32, Device::cuda(0)),
                      Catch::Equals("unsupported device: cuda (built without CUDA)"));
}

TEST_CASE("shapes and views", "[tensor]") {
  const Shape s{2, 3, 5};
  CHECK(s.rank() == 3);
  CHECK(s.numel() == 30);
  CHECK(s[-1] == 5);
  CHECK(s.str() == "(2, 3, 5)");
  CHECK(Shape{}.numel() == 1);
  REQUIRE_THROWS_WITH((Shape{1, 2, 3, 4, 5, 6, 7}), Catch::Contains("over the limit of 6"));
  Tensor t(s, DType::f32);
  CHECK(t.view().bytes() == 120);
  CHECK(t.view().reshape({6, 5}).dim(0) == 6);
  REQUIRE_THROWS_WITH(t.view().reshape({7, 5}), Catch::Contains("cannot view (2, 3, 5) tensor as (7, 5)"));
  REQUIRE_THROWS_WITH(t.data_as<double>(), Catch::Contains("f32 (2, 3, 5) on cpu read as f64"));
  CHECK(reinterpret_cast<uintptr_t>(t.view().data()) % 64 == 0);
  Tensor moved = std::move(t);
  CHECK(t.view().empty());
  CHECK(moved.numel() == 30);
}

TEST_CASE("bf16 and f16 round to nearest even like the GPU's conversions", "[dtype]") {
  CHECK(bf16(1.0f).bits == 0x3f80);
  CHECK(bf16(-2.0f).bits == 0xc000);
  CHECK(bf16(1.00390625f).bits == 0x3f80);   // exactly half an ulp above 1: ties to even
  CHECK(bf16(1.01171875f).bits == 0x3f82);   // half an ulp above 0x3f81: ties to even (up)
  CHECK(std::isnan(static_cast<float>(bf16(NAN))));
  CHECK(f16(1.0f).bits == 0x3c00);
  CHECK(f16(65504.0f).bits == 0x7bff);       // largest finite
  CHECK(f16(65520.0f).bits == 0x7c00);       // rounds to infinity
  CHECK(f16(-65519.0f).bits == 0xfbff);
  CHECK(f16(5.9604645e-8f).bits == 0x0001);  // smallest subnormal
  CHECK(f16(2.9802322e-8f).bits == 0x0000);  // half of it: ties to even (zero)
  CHECK(f16(6.1035156e-5f).bits == 0x0400);  // smallest normal
  CHECK(f16(1.00048828125f).bits == 0x3c00); // tie at 1 + 2^-11: to even
  CHECK(std::isnan(static_cast<float>(f16(NAN))));
  // Every finite f16 converts to float and back unchanged.
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    f16 h;
    h.bits = static_cast<uint16_t>(bits);
    const float f = static_cast<float>(h);
    if (std::isnan(f)) continue;
    REQUIRE(f16(f).bits == h.bits);
  }
}

TEST_CASE("memory plans: aligned entries, one block per kind, totals", "[memory]") {
  MemoryPlan plan;
  const int w = plan.add(MemoryKind::parameters, "encoder.0.w", DType::f32, {512, 512});
  const int b = plan.add(MemoryKind::parameters, "encoder.0.b", DType::f32, {3});
  const int x = plan.add(MemoryKind::activations, "x", DType::bf16, {7, 5});
  const int y = plan.add(MemoryKind::activations, "y", DType::f32, {100});
  CHECK(plan.entry(b).offset == 512 * 512 * 4);
  CHECK(plan.entry(y).offset == 256);  // 70 bytes of x, rounded up to the alignment
  CHECK(plan.bytes(MemoryKind::parameters) == 512 * 512 * 4 + 12);
  CHECK(plan.bytes(MemoryKind::activations) == 256 + 400);
  CHECK(plan.total() == 512 * 512 * 4 + 12 + 656);
  CHECK(plan.report() == "parameters 1.0 MiB, activations 656 B, total 1.0 MiB");
  REQUIRE_THROWS_WITH(plan.entry(9), Catch::Contains("no entry 9"));

  PlannedMemory mem(plan, Device::cpu());
  CHECK(mem.view(w).data() == mem.block(MemoryKind::parameters));
  CHECK(static_cast<char*>(mem.view(b).data()) ==
        static_cast<char*>(mem.block(MemoryKind::parameters)) + 512 * 512 * 4);
  CHECK(mem.view(x).shape() == Shape{7, 5});
  CHECK(mem.view(x).dtype() == DType::bf16);
  CHECK(mem.block(MemoryKind::optimizer) == nullptr);
  // Views of one plan never overlap: write each, read each back.
  std::memset(mem.view(x).data(), 0x11, mem.view(x).bytes());
  std::memset(mem.view(y).data(), 0x22, mem.view(y).bytes());
  CHECK(static_cast<unsigned char*>(mem.view(x).data())[69] == 0x11);
  CHECK(format_bytes(3ull << 30) == "3.00 GiB");
}

TEST_CASE("zeroed memory starts as zeros, small and large, freed and taken again", "[memory]") {
  const Stream& st = host_stream();
  // Below and above the 2 MiB from which the CPU maps fresh pages instead
  // of writing zeros; each block is dirtied and freed, and the next one of
  // the size must be zeros again (the allocator may hand back a used block).
  for (size_t bytes : {size_t{100}, size_t{3} << 20, (size_t{2} << 20) + 1, size_t{8} << 20}) {
    for (int round = 0; round < 2; ++round) {
      auto* p = static_cast<unsigned char*>(device_alloc_zeroed(Device::cpu(), bytes, st));
      REQUIRE(p != nullptr);
      size_t nonzero = 0;
      for (size_t i = 0; i < bytes; i += 509) nonzero += p[i] != 0;
      CHECK(nonzero + (p[bytes - 1] != 0) == 0);
      std::memset(p, 0x5a, bytes);
      device_free(Device::cpu(), p);
      void* dirty = device_alloc(Device::cpu(), bytes);  // plain memory of the size, freed as usual
      std::memset(dirty, 0x5a, bytes);
      device_free(Device::cpu(), dirty);
    }
  }
  MemoryPlan plan;
  const int a = plan.add(MemoryKind::activations, "a", DType::f32, {1 << 20});
  const int k = plan.add(MemoryKind::kv_cache, "k", DType::f32, {16});
  PlannedMemory mem(plan, Device::cpu(), {MemoryKind::activations}, st);
  const float* pa = mem.view(a).data_as<float>();
  CHECK(std::all_of(pa, pa + (1 << 20), [](float v) { return v == 0.0f; }));
  CHECK(mem.view(k).data() != nullptr);
}

TEST_CASE("phases sum the time between marks by phase, in the order first marked", "[core]") {
  Stream cpu(Device::cpu()), other(Device::cpu());
  phases::mark(cpu, "before start");  // timing off: ignored
  phases::start(cpu);
  REQUIRE(phases::on());
  for (int i = 0; i < 2; ++i) {
    phases::mark(cpu, "a");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    phases::mark(other, "another stream");  // ignored
    phases::mark(cpu, "b");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const std::vector<phases::Total> t = phases::stop();
  CHECK_FALSE(phases::on());
  REQUIRE(t.size() == 2);
  CHECK(t[0].phase == "a");
  CHECK(t[1].phase == "b");
  CHECK(t[0].spans == 2);
  CHECK(t[1].spans == 2);  // the last span runs to stop()
  CHECK(t[0].seconds >= 0.040);
  CHECK(t[1].seconds >= 0.010);
  CHECK(t[0].seconds > t[1].seconds);
  REQUIRE_THROWS_WITH(phases::stop(), Catch::Contains("without phases::start"));
}
