// Megatron-style tensor parallelism: an MLP's linear pair (linear -> gelu ->
// identity dropout -> linear) is sharded over tp ranks, the first by output
// features, the second by input features; tp_copy enters the region,
// tp_reduce sums the partial results, and the second bias is added once,
// after the sum. Linears that are not such a pair stay replicated, each
// marked with why; a tied weight, a drawing dropout and a hidden size that
// does not divide stop a pair.
// RUN: pippy-opt %s --pippy-tensor-parallel=tp=2 | FileCheck %s
// RUN: pippy-opt %s --pippy-tensor-parallel=tp=3 | FileCheck %s --check-prefix=THREE
// RUN: not pippy-opt %s --pippy-tensor-parallel=tp=1 2>&1 | FileCheck %s --check-prefix=ONE
// RUN: pippy-opt %s --pippy-tensor-parallel=tp=2 --pippy-report -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: pippy-opt %s --pippy-tensor-parallel=tp=2 --pippy-report=format=json -o /dev/null | FileCheck %s --check-prefix=JSON

// CHECK: module attributes {pippy.tensor_parallel = 2 : i64}
// CHECK-LABEL: pippy.stage 0
// CHECK:      %[[X:.*]]: !torch.vtensor<[4,16],f32>
// CHECK:      %[[W1:.*]] = pippy.param "mlp.fc.weight" {pippy.shard = array<i64: 0, 2>} : !torch.vtensor<[32,16],f32>
// CHECK:      %[[B1:.*]] = pippy.param "mlp.fc.bias" {pippy.shard = array<i64: 0, 2>} : !torch.vtensor<[32],f32>
// CHECK:      %[[C:.*]] = pippy.tp_copy %[[X]] {tp = 2 : i64} : !torch.vtensor<[4,16],f32>
// CHECK:      %[[H:.*]] = torch.aten.linear %[[C]], %[[W1]], %[[B1]] {pippy.tensor_parallel = "column"} : {{.*}} -> !torch.vtensor<[4,32],f32>
// CHECK:      %[[G:.*]] = torch.aten.gelu %[[H]], %{{.*}} : !torch.vtensor<[4,32],f32>, !torch.str -> !torch.vtensor<[4,32],f32>
// CHECK:      %[[D:.*]] = torch.aten.dropout %[[G]], {{.*}} -> !torch.vtensor<[4,32],f32>
// CHECK:      %[[W2:.*]] = pippy.param "mlp.proj.weight" {pippy.shard = array<i64: 1, 2>} : !torch.vtensor<[16,32],f32>
// CHECK:      %[[B2:.*]] = pippy.param "mlp.proj.bias" : !torch.vtensor<[16],f32>
// CHECK:      %[[NONE:.*]] = torch.constant.none
// CHECK:      %[[P:.*]] = torch.aten.linear %[[D]], %[[W2]], %[[NONE]] {pippy.tensor_parallel = "row"} : {{.*}} -> !torch.vtensor<[4,16],f32>
// CHECK:      %[[R:.*]] = pippy.tp_reduce %[[P]] {tp = 2 : i64} : !torch.vtensor<[4,16],f32>
// CHECK:      %[[Y:.*]] = torch.aten.add.Tensor %[[R]], %[[B2]], %{{.*}} : {{.*}} -> !torch.vtensor<[4,16],f32>
// CHECK:      torch.aten.relu %[[Y]]
// CHECK:      torch.aten.linear {{.*}} {pippy.tensor_parallel = "replicated: its output does not reach another linear through element-wise ops alone"}
// CHECK-LABEL: pippy.stage 1
// CHECK:      torch.aten.linear {{.*}} {pippy.tensor_parallel = "replicated: a weight of the pair is not a parameter used by it alone (tied or shared weights stay whole)"}
// CHECK:      torch.aten.linear {{.*}} {pippy.tensor_parallel = "replicated: its output does not reach another linear through element-wise ops alone"}
// A pair with nothing between the two linears.
// CHECK:      pippy.tp_copy
// CHECK:      torch.aten.linear {{.*}} {pippy.tensor_parallel = "column"} : {{.*}} -> !torch.vtensor<[4,8],f32>
// CHECK:      torch.aten.linear {{.*}} {pippy.tensor_parallel = "row"}
// CHECK:      pippy.tp_reduce

// THREE: torch.aten.linear {{.*}} {pippy.tensor_parallel = "replicated: 64 hidden features do not divide by tp 3"}

// ONE: error: --pippy-tensor-parallel needs tp of at least 2; got 1

// REPORT:      tensor parallel: 2 linears column-parallel, 2 row-parallel, 3 replicated
// REPORT-NEXT:   stage 0 mlp.fc.weight: column
// REPORT-NEXT:   stage 0 mlp.proj.weight: row
// REPORT-NEXT:   stage 0 tied.weight: replicated: its output does not reach another linear through element-wise ops alone
// REPORT-NEXT:   stage 1 tied.weight: replicated: a weight of the pair is not a parameter used by it alone (tied or shared weights stay whole)
// REPORT-NEXT:   stage 1 out.weight: replicated: its output does not reach another linear through element-wise ops alone
// REPORT-NEXT:   stage 1 last.weight: column
// REPORT-NEXT:   stage 1 final.weight: row

// JSON: "tensor_parallel": [
// JSON:     "module": "mlp.fc.weight",
// JSON-NEXT: "role": "column",
// JSON-NEXT: "stage": 0

module {
func.func @forward(%arg0: !torch.vtensor<[4,16],f32>) -> !torch.vtensor<[4,16],f32> {
  %0 = pippy.pipeline tied [#pippy.tied_group<"tied.weight", stages = [0, 1]>] -> !torch.vtensor<[4,16],f32> {
    %s0 = pippy.stage 0 (%arg0) : (!torch.vtensor<[4,16],f32>) -> !torch.vtensor<[4,16],f32> {
    ^bb0(%x: !torch.vtensor<[4,16],f32>):
      %w1 = pippy.param "mlp.fc.weight" : !torch.vtensor<[64,16],f32>
      %b1 = pippy.param "mlp.fc.bias" : !torch.vtensor<[64],f32>
      %h = torch.aten.linear %x, %w1, %b1 : !torch.vtensor<[4,16],f32>, !torch.vtensor<[64,16],f32>, !torch.vtensor<[64],f32> -> !torch.vtensor<[4,64],f32>
      %str = torch.constant.str "none"
      %g = torch.aten.gelu %h, %str : !torch.vtensor<[4,64],f32>, !torch.str -> !torch.vtensor<[4,64],f32>
      %p0 = torch.constant.float 0.000000e+00
      %true = torch.constant.bool true
      %d = torch.aten.dropout %g, %p0, %true : !torch.vtensor<[4,64],f32>, !torch.float, !torch.bool -> !torch.vtensor<[4,64],f32>
      %w2 = pippy.param "mlp.proj.weight" : !torch.vtensor<[16,64],f32>
      %b2 = pippy.param "mlp.proj.bias" : !torch.vtensor<[16],f32>
      %y = torch.aten.linear %d, %w2, %b2 : !torch.vtensor<[4,64],f32>, !torch.vtensor<[16,64],f32>, !torch.vtensor<[16],f32> -> !torch.vtensor<[4,16],f32>
      %r = torch.aten.relu %y : !torch.vtensor<[4,16],f32> -> !torch.vtensor<[4,16],f32>
      %t = pippy.param "tied.weight" : !torch.vtensor<[16,16],f32>
      %none = torch.constant.none
      %z = torch.aten.linear %r, %t, %none : !torch.vtensor<[4,16],f32>, !torch.vtensor<[16,16],f32>, !torch.none -> !torch.vtensor<[4,16],f32>
      pippy.yield %z : !torch.vtensor<[4,16],f32>
    }
    %s1 = pippy.stage 1 (%s0) : (!torch.vtensor<[4,16],f32>) -> !torch.vtensor<[4,16],f32> {
    ^bb0(%x: !torch.vtensor<[4,16],f32>):
      // The tied weight stays whole, so its pair does not form.
      %t = pippy.param "tied.weight" : !torch.vtensor<[16,16],f32>
      %none = torch.constant.none
      %a = torch.aten.linear %x, %t, %none : !torch.vtensor<[4,16],f32>, !torch.vtensor<[16,16],f32>, !torch.none -> !torch.vtensor<[4,16],f32>
      %w3 = pippy.param "out.weight" : !torch.vtensor<[16,16],f32>
      %b = torch.aten.linear %a, %w3, %none : !torch.vtensor<[4,16],f32>, !torch.vtensor<[16,16],f32>, !torch.none -> !torch.vtensor<[4,16],f32>
      // A dropout that draws stops a pair.
      %p = torch.constant.float 1.000000e-01
      %true = torch.constant.bool true
      %d = torch.aten.dropout %b, %p, %true : !torch.vtensor<[4,16],f32>, !torch.float, !torch.bool -> !torch.vtensor<[4,16],f32>
      %w4 = pippy.param "last.weight" : !torch.vtensor<[16,16],f32>
      %c = torch.aten.linear %d, %w4, %none : !torch.vtensor<[4,16],f32>, !torch.vtensor<[16,16],f32>, !torch.none -> !torch.vtensor<[4,16],f32>
      %w5 = pippy.param "final.weight" : !torch.vtensor<[16,16],f32>
      %e = torch.aten.linear %c, %w5, %none : !torch.vtensor<[4,16],f32>, !torch.vtensor<[16,16],f32>, !torch.none -> !torch.vtensor<[4,16],f32>
      pippy.yield %e : !torch.vtensor<[4,16],f32>
    }
    pippy.yield %s1 : !torch.vtensor<[4,16],f32>
  }
  return %0 : !torch.vtensor<[4,16],f32>
}
}
