//===- interpreter.cpp - per-op overhead of the stage interpreter ---------===//
//
// Runs a chain of N cheap ops (`aten::add.Tensor` on one-element tensors, so
// kernel time is small and the interpreter's own cost shows) through
// pippy::Program and through direct libtorch calls, interleaved, and reports
// the median time per op of each and their difference. Grad mode off and on.
//
//   pippy-bench-interpreter [N=1000] [REPS=31]
//
//===----------------------------------------------------------------------===//

#include "pippy/Runtime/Program.h"

#include "pippy/Dialect/Pippy/PippyDialect.h"
#include "pippy/Dialect/Torch/TorchDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

namespace {

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
  auto module = mlir::parseSourceString<mlir::ModuleOp>(chainIR(n), &context);
  pippy::Program program = pippy::Program::compile(
      module->lookupSymbol<mlir::func::FuncOp>("forward"));

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
  return 0;
}
