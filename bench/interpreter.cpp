//===- interpreter.cpp - per-op overhead of the stage interpreter ---------===//
//
// Runs a chain of N cheap ops (`aten::add.Tensor` on one-element tensors, so
// kernel time is small and the interpreter's own cost shows) through
// pippy::Program and through direct libtorch calls, interleaved, and reports
// the median time per op of each and their difference. Grad mode off and on.
//
// Then a chain of N small linears (8 x 8 weights with bias, each its own
// parameters) trained one micro-batch at a time, forward and backward: direct
// libtorch calls with autograd, pippy with autograd's weight gradients, and
// pippy's fused linears (Program::fuseWeightGradients), per linear.
//
//   pippy-bench-interpreter [N=1000] [REPS=31]
//
//===----------------------------------------------------------------------===//

#include "pippy/Runtime/Program.h"

#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Dialect/Torch/TorchDialect.h"
#include "pippy/Executable/Lowering.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <string>

namespace {

/// The module's program, lowered to an executable and loaded.
pippy::Program lowerAndLoad(mlir::ModuleOp module) {
  mlir::FailureOr<std::string> bytes = pippy::exe::lowerForOneRank(module);
  if (mlir::failed(bytes))
    throw pippy::RuntimeError("the lowering failed");
  return pippy::Program::loadFirstStage(*bytes);
}

std::string chainIR(int n) {
  std::string t = "!torch.vtensor<[1],f32>";
  std::string ir =
      "func.func @forward(%x: " + t + ") -> " + t + " {\n" +
      "  %int1 = torch.constant.int 1\n  %v0 = torch.aten.add.Tensor "
      "%x, %x, %int1 : " +
      t + ", " + t + ", !torch.int -> " + t + "\n";
  for (int i = 1; i < n; ++i)
    ir += "  %v" + std::to_string(i) + " = torch.aten.add.Tensor %v" +
          std::to_string(i - 1) + ", %x, %int1 : " + t + ", " + t +
          ", !torch.int -> " + t + "\n";
  ir += "  return %v" + std::to_string(n - 1) + " : " + t + "\n}\n";
  return ir;
}

std::string linearChainIR(int n) {
  std::string t = "!torch.vtensor<[1,8],f32>";
  std::string ir = "func.func @forward(%x: " + t + ") -> " + t + " {\n";
  for (int i = 0; i < n; ++i) {
    std::string k = std::to_string(i);
    ir += "  %w" + k + " = pippy.param \"w" + k +
          "\" : !torch.vtensor<[8,8],f32>\n" + "  %b" + k +
          " = pippy.param \"b" + k + "\" : !torch.vtensor<[8],f32>\n" + "  %v" +
          k + " = torch.aten.linear " +
          (i ? "%v" + std::to_string(i - 1) : "%x") + ", %w" + k + ", %b" + k +
          " : " + t +
          ", !torch.vtensor<[8,8],f32>, !torch.vtensor<[8],f32> -> " + t + "\n";
  }
  ir += "  return %v" + std::to_string(n - 1) + " : " + t + "\n}\n";
  return ir;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <typename F> double seconds(F &&f) {
  auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

/// Per-op overhead: a chain of `n` adds, direct against interpreted.
void benchOverhead(mlir::MLIRContext &context, int n, int reps) {
  auto module = mlir::parseSourceString<mlir::ModuleOp>(chainIR(n), &context);
  pippy::Program program = lowerAndLoad(*module);

  std::printf("ops per run %d, runs %d (medians, interleaved)\n", n, reps);
  std::printf("%-8s %14s %14s %14s\n", "grad", "direct us/op", "pippy us/op",
              "overhead us/op");
  for (bool grad : {false, true}) {
    at::Tensor x = torch::ones({1}).requires_grad_(grad);
    c10::InferenceMode guard(false);
    torch::AutoGradMode mode(grad);
    std::vector<double> direct, interp;
    std::vector<c10::IValue> args{x};
    for (int r = 0; r < reps + 3; ++r) {
      double d = seconds([&] {
        at::Tensor v = at::add(x, x, 1);
        for (int i = 1; i < n; ++i)
          v = at::add(v, x, 1);
      });
      double p = seconds([&] { program.run(args, {}); });
      if (r >= 3) { // warm-up
        direct.push_back(d * 1e6 / n);
        interp.push_back(p * 1e6 / n);
      }
    }
    std::printf("%-8s %14.3f %14.3f %14.3f\n", grad ? "on" : "off",
                median(direct), median(interp),
                median(interp) - median(direct));
  }
}

/// Forward and backward of `n` 8x8 linears: autograd directly, through the
/// interpreter, and with the interpreter's in-place weight gradients.
void benchLinears(mlir::MLIRContext &context, int n, int reps) {
  auto linears =
      mlir::parseSourceString<mlir::ModuleOp>(linearChainIR(n), &context);
  pippy::Program plain = lowerAndLoad(*linears), fused = lowerAndLoad(*linears);
  std::map<std::string, at::Tensor> params;
  std::set<std::string> weights;
  std::vector<at::Tensor> ws, bs;
  for (int i = 0; i < n; ++i) {
    std::string k = std::to_string(i);
    ws.push_back((torch::randn({8, 8}) * 0.3).requires_grad_(true));
    bs.push_back(torch::randn({8}).requires_grad_(true));
    params["w" + k] = ws.back();
    params["b" + k] = bs.back();
    weights.insert("w" + k);
  }
  fused.fuseWeightGradients(weights);
  at::Tensor x = torch::randn({1, 8});
  std::vector<c10::IValue> args{x};
  std::vector<double> direct, autograd, inPlace;
  for (int r = 0; r < reps + 3; ++r) {
    double d = seconds([&] {
      at::Tensor v = x;
      for (int i = 0; i < n; ++i)
        v = at::linear(v, ws[i], bs[i]);
      v.sum().backward();
    });
    double a = seconds(
        [&] { plain.run(args, params)[0].toTensor().sum().backward(); });
    double f = seconds(
        [&] { fused.run(args, params)[0].toTensor().sum().backward(); });
    if (r >= 3) {
      direct.push_back(d * 1e6 / n);
      autograd.push_back(a * 1e6 / n);
      inPlace.push_back(f * 1e6 / n);
    }
  }
  std::printf("\nlinear 8x8, forward + backward, us per linear\n");
  std::printf("%-24s %10.3f\n%-24s %10.3f\n%-24s %10.3f\n", "direct (autograd)",
              median(direct), "pippy, autograd", median(autograd),
              "pippy, fused", median(inPlace));
}

} // namespace

int main(int argc, char **argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 1000;
  int reps = argc > 2 ? std::atoi(argv[2]) : 31;
  if (n < 1 || reps < 1) {
    std::fprintf(stderr,
                 "usage: pippy-bench-interpreter [OPS >= 1] [REPS >= 1]\n");
    return 2;
  }
  at::set_num_threads(1);
  mlir::MLIRContext context;
  context.loadDialect<mlir::func::FuncDialect, mlir::torch::TorchDialect,
                      mlir::pippy::PippyDialect>();
  benchOverhead(context, n, reps);
  benchLinears(context, n, reps);
  return 0;
}
