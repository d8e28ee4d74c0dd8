// AllReduceRmsNorm::can_implement and GemmAllReduceRmsNorm::can_implement (the Context-free
// forms) refuse shapes, types, alignments and
// overlaps the kernels cannot run, with a sentence naming the problem. Host only: no GPU needed
// (pointers are checked, never dereferenced).
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "iris/ops/allreduce_rmsnorm.hpp"
#include "iris/ops/gemm_allreduce_rmsnorm.hpp"
#include "ops/can_implement.hpp"

namespace {

using iris::ops::AllReduceRmsNorm;
using iris::ops::AllReduceRmsNormArguments;
using iris::ops::DType;
using iris::ops::NormOutput;
using ops_test::accepts;
using ops_test::fake;
using ops_test::refuses;

// Fake, 256-byte aligned addresses, far enough apart for 64 x 4096 bf16 (512 KiB) each.
AllReduceRmsNormArguments good() {
  AllReduceRmsNormArguments args;
  args.tokens = 64;
  args.hidden = 4096;
  args.x = fake(0x1000000);
  args.residual = fake(0x2000000);
  args.gamma = fake(0x3000000);
  args.residual_out = fake(0x4000000);
  args.y = fake(0x5000000);
  return args;
}

TEST(AllReduceRmsNormCanImplement, AcceptsDecodeShapesBothTypesAndInPlace) {
  EXPECT_TRUE(accepts(AllReduceRmsNorm::can_implement(good())));
  auto args = good();
  args.tokens = 1;
  args.hidden = 8;
  EXPECT_TRUE(accepts(AllReduceRmsNorm::can_implement(args)));
  args = good();
  args.type = DType::kF16;
  EXPECT_TRUE(accepts(AllReduceRmsNorm::can_implement(args)));
  args = good();
  args.residual_out = const_cast<void*>(args.residual);  // in place
  EXPECT_TRUE(accepts(AllReduceRmsNorm::can_implement(args)));
  EXPECT_EQ(AllReduceRmsNorm::workspace_size(good()), 0u);
}

TEST(AllReduceRmsNormCanImplement, RefusesShapesWithASentence) {
  auto args = good();
  args.hidden = 1001;
  EXPECT_TRUE(refuses(AllReduceRmsNorm::can_implement(args), {"hidden = 1001", "multiple of 8"}));
  args.hidden = 0;
  EXPECT_TRUE(refuses(AllReduceRmsNorm::can_implement(args), "hidden = 0"));
  args = good();
  args.tokens = 0;
  EXPECT_TRUE(refuses(AllReduceRmsNorm::can_implement(args), "tokens = 0"));
  args.tokens = -3;
  EXPECT_TRUE(refuses(AllReduceRmsNorm::can_implement(args), "tokens = -3"));
}

TEST(AllReduceRmsNormCanImplement, RefusesTypesEpsAndBlocks) {
  auto args = good();
  args.type = DType::kF32;
  EXPECT_TRUE(refuses(AllReduceRmsNorm::can_implement(args), {"fp32", "bf16 or fp16"}));
  for (float eps : {0.f, -1e-6f, std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()}) {
    args = good();
    args.eps = eps;
    EXPECT_TRUE(refuses(AllReduceRmsNorm::can_implement(args), "eps")) << "eps = " << eps;
  }
  args = good();
  args.max_blocks = -1;
  EXPECT_TRUE(refuses(AllReduceRmsNorm::can_implement(args), "max_blocks = -1"));
}

TEST(AllReduceRmsNormCanImplement, RefusesNullAndMisalignedTensorsByName) {
  auto args = good();
  args.gamma = nullptr;
  EXPECT_TRUE(refuses(AllReduceRmsNorm::can_implement(args), "gamma is null"));
  args = good();
  args.y = fake(0x5000008);
  EXPECT_TRUE(refuses(AllReduceRmsNorm::can_implement(args), "y must be 16-byte aligned"));
  args = good();
  args.x = fake(0x1000002);
  EXPECT_TRUE(refuses(AllReduceRmsNorm::can_implement(args), "x must be 16-byte aligned"));
}

TEST(AllReduceRmsNormCanImplement, RefusesOverlaps) {
  auto args = good();
  // residual_out starts inside residual (64 x 4096 bf16 = 512 KiB) without being it.
  args.residual_out = fake(0x2000000 + 4096);
  EXPECT_TRUE(
      refuses(AllReduceRmsNorm::can_implement(args), "residual_out must be residual itself"));
  args = good();
  args.y = const_cast<void*>(args.x);
  EXPECT_TRUE(refuses(AllReduceRmsNorm::can_implement(args), "y must not overlap x"));
  args = good();
  args.y = args.residual_out;
  EXPECT_TRUE(refuses(AllReduceRmsNorm::can_implement(args), "y must not overlap residual_out"));
  args = good();
  args.y = fake(0x3000000 - 16);  // y's tail covers gamma's start
  EXPECT_TRUE(refuses(AllReduceRmsNorm::can_implement(args), "y must not overlap gamma"));
  args = good();
  args.gamma = fake(0x5000000 + 8192);  // gamma inside y
  EXPECT_TRUE(refuses(AllReduceRmsNorm::can_implement(args), "y must not overlap gamma"));
}

TEST(AllReduceRmsNormCanImplement, Fp8OutputScaleAndSize) {
  auto args = good();
  args.y_type = NormOutput::kFp8E4M3;
  args.y_scale = 0.25f;
  EXPECT_TRUE(accepts(AllReduceRmsNorm::can_implement(args)));
  args.type = DType::kF16;
  EXPECT_TRUE(accepts(AllReduceRmsNorm::can_implement(args)));
  for (float scale : {0.f, -1.f, std::numeric_limits<float>::infinity(),
                      std::numeric_limits<float>::quiet_NaN()}) {
    args.y_scale = scale;
    EXPECT_TRUE(refuses(AllReduceRmsNorm::can_implement(args), "y_scale")) << "y_scale = " << scale;
  }
  args = good();
  args.y_scale = 2.f;  // a scale without the fp8 output
  EXPECT_TRUE(refuses(AllReduceRmsNorm::can_implement(args), "applies only to the fp8 output"));
  // fp8 y is one byte per element: 256 KiB for 64 x 4096, so y may end where gamma starts.
  args = good();
  args.y_type = NormOutput::kFp8E4M3;
  args.y = fake(0x3000000 - 64 * 4096);
  EXPECT_TRUE(accepts(AllReduceRmsNorm::can_implement(args)));
  args.y = fake(0x3000000 - 64 * 4096 + 16);
  EXPECT_TRUE(refuses(AllReduceRmsNorm::can_implement(args), "y must not overlap gamma"));
  args = good();
  args.y_type = static_cast<NormOutput>(7);
  EXPECT_TRUE(refuses(AllReduceRmsNorm::can_implement(args), "NormOutput"));
}

// GemmAllReduceRmsNorm: the norm's rules (M and N as tokens and hidden), then the GEMM's.
iris::ops::GemmAllReduceRmsNormArguments good_layer() {
  iris::ops::GemmAllReduceRmsNormArguments args;
  args.m = 64;
  args.n = 4096;
  args.k = 3584;
  args.a = fake(0x10000000);
  args.b = fake(0x20000000);
  args.residual = fake(0x2000000);
  args.gamma = fake(0x3000000);
  args.residual_out = fake(0x4000000);
  args.y = fake(0x5000000);
  return args;
}

TEST(GemmAllReduceRmsNormCanImplement, AcceptsLayersAndRefusesWithASentence) {
  using iris::ops::GemmAllReduceRmsNorm;
  auto args = good_layer();
  EXPECT_TRUE(accepts(GemmAllReduceRmsNorm::can_implement(args)));
  args.type = DType::kF16;
  EXPECT_TRUE(accepts(GemmAllReduceRmsNorm::can_implement(args)));
  args.y_type = NormOutput::kFp8E4M3;
  args.y_scale = 0.5f;
  EXPECT_TRUE(accepts(GemmAllReduceRmsNorm::can_implement(args)));
  EXPECT_EQ(GemmAllReduceRmsNorm::workspace_size(args), 0u);
  args = good_layer();
  args.residual_out = const_cast<void*>(args.residual);  // in place
  EXPECT_TRUE(accepts(GemmAllReduceRmsNorm::can_implement(args)));

  args = good_layer();
  args.k = 100;  // rows of A and B of 200 bytes
  EXPECT_TRUE(refuses(GemmAllReduceRmsNorm::can_implement(args), {"the GEMM", "100"}));
  args = good_layer();
  args.a = fake(0x10000004);
  EXPECT_TRUE(refuses(GemmAllReduceRmsNorm::can_implement(args), "the GEMM"));
  args = good_layer();
  args.n = 1001;
  EXPECT_TRUE(refuses(GemmAllReduceRmsNorm::can_implement(args), "hidden = 1001"));
  args = good_layer();
  args.m = 0;
  EXPECT_TRUE(refuses(GemmAllReduceRmsNorm::can_implement(args), "tokens = 0"));
  args = good_layer();
  args.type = DType::kF32;
  EXPECT_TRUE(refuses(GemmAllReduceRmsNorm::can_implement(args), "bf16 or fp16"));
  args = good_layer();
  args.y = args.residual_out;
  EXPECT_TRUE(
      refuses(GemmAllReduceRmsNorm::can_implement(args), "y must not overlap residual_out"));
  args = good_layer();
  args.y_scale = 3.f;
  EXPECT_TRUE(refuses(GemmAllReduceRmsNorm::can_implement(args), "applies only to the fp8 output"));
  args = good_layer();
  args.gamma = nullptr;
  EXPECT_TRUE(refuses(GemmAllReduceRmsNorm::can_implement(args), "gamma is null"));
}

}  // namespace
