// The graph IR and the pipeline IR of the pippy dialect print and read back
// unchanged: parameters, split points, a pipeline with a skip connection
// (stage 0 feeds stage 2 directly) and a tied group.
// RUN: pippy-opt %s | FileCheck %s
// RUN: pippy-opt %s | pippy-opt | FileCheck %s
// RUN: pippy-opt %s --mlir-print-op-generic | pippy-opt | FileCheck %s
// RUN: pippy-opt %s --emit-bytecode | pippy-opt | FileCheck %s

// CHECK-LABEL: func.func @graph(
// CHECK:      %0 = pippy.param "fc1.weight" : !torch.vtensor<[16,32],f32>
// CHECK-NEXT: %1 = pippy.param "fc1.bias" : !torch.vtensor<[16],f32>
// CHECK-NEXT: %2 = torch.aten.linear %arg0, %0, %1 : !torch.vtensor<[4,32],f32>, !torch.vtensor<[16,32],f32>, !torch.vtensor<[16],f32> -> !torch.vtensor<[4,16],f32>
// CHECK-NEXT: pippy.split_point
// CHECK-NEXT: %3 = torch.aten.relu %2 : !torch.vtensor<[4,16],f32> -> !torch.vtensor<[4,16],f32>
// CHECK-NEXT: return %3 : !torch.vtensor<[4,16],f32>
func.func @graph(%x: !torch.vtensor<[4,32],f32>) -> !torch.vtensor<[4,16],f32> {
  %w = pippy.param "fc1.weight" : !torch.vtensor<[16,32],f32>
  %b = pippy.param "fc1.bias" : !torch.vtensor<[16],f32>
  %0 = torch.aten.linear %x, %w, %b : !torch.vtensor<[4,32],f32>, !torch.vtensor<[16,32],f32>, !torch.vtensor<[16],f32> -> !torch.vtensor<[4,16],f32>
  pippy.split_point
  %1 = torch.aten.relu %0 : !torch.vtensor<[4,16],f32> -> !torch.vtensor<[4,16],f32>
  return %1 : !torch.vtensor<[4,16],f32>
}

// CHECK-LABEL: func.func @pipeline(
// CHECK:      %0 = pippy.pipeline tied [#pippy.tied_group<"wte.weight", stages = [0, 2]>] -> !torch.vtensor<[4,8],f32> {
// CHECK-NEXT:   %1:2 = pippy.stage 0 (%arg0) : (!torch.vtensor<[4,8],f32>) -> (!torch.vtensor<[4,8],f32>, !torch.vtensor<[4,8],f32>) {
// CHECK-NEXT:   ^bb0(%arg1: !torch.vtensor<[4,8],f32>):
// CHECK-NEXT:     %4 = pippy.param "wte.weight" : !torch.vtensor<[8,8],f32>
// CHECK-NEXT:     %5 = torch.aten.matmul %arg1, %4 : !torch.vtensor<[4,8],f32>, !torch.vtensor<[8,8],f32> -> !torch.vtensor<[4,8],f32>
// CHECK-NEXT:     pippy.yield %5, %arg1 : !torch.vtensor<[4,8],f32>, !torch.vtensor<[4,8],f32>
// CHECK-NEXT:   }
// CHECK-NEXT:   %2 = pippy.stage 1 (%1#0) : (!torch.vtensor<[4,8],f32>) -> !torch.vtensor<[4,8],f32> {
// CHECK:        %3 = pippy.stage 2 (%2, %1#1) : (!torch.vtensor<[4,8],f32>, !torch.vtensor<[4,8],f32>) -> !torch.vtensor<[4,8],f32> {
// CHECK:          pippy.param "wte.weight" : !torch.vtensor<[8,8],f32>
// CHECK:        pippy.yield %3 : !torch.vtensor<[4,8],f32>
// CHECK-NEXT: }
func.func @pipeline(%x: !torch.vtensor<[4,8],f32>) -> !torch.vtensor<[4,8],f32> {
  %out = pippy.pipeline tied [#pippy.tied_group<"wte.weight", stages = [0, 2]>] -> !torch.vtensor<[4,8],f32> {
    %h:2 = pippy.stage 0 (%x) : (!torch.vtensor<[4,8],f32>) -> (!torch.vtensor<[4,8],f32>, !torch.vtensor<[4,8],f32>) {
    ^bb0(%in: !torch.vtensor<[4,8],f32>):
      %w = pippy.param "wte.weight" : !torch.vtensor<[8,8],f32>
      %y = torch.aten.matmul %in, %w : !torch.vtensor<[4,8],f32>, !torch.vtensor<[8,8],f32> -> !torch.vtensor<[4,8],f32>
      pippy.yield %y, %in : !torch.vtensor<[4,8],f32>, !torch.vtensor<[4,8],f32>
    }
    %g = pippy.stage 1 (%h#0) : (!torch.vtensor<[4,8],f32>) -> !torch.vtensor<[4,8],f32> {
    ^bb0(%in: !torch.vtensor<[4,8],f32>):
      %r = torch.aten.relu %in : !torch.vtensor<[4,8],f32> -> !torch.vtensor<[4,8],f32>
      pippy.yield %r : !torch.vtensor<[4,8],f32>
    }
    %o = pippy.stage 2 (%g, %h#1) : (!torch.vtensor<[4,8],f32>, !torch.vtensor<[4,8],f32>) -> !torch.vtensor<[4,8],f32> {
    ^bb0(%in: !torch.vtensor<[4,8],f32>, %skip: !torch.vtensor<[4,8],f32>):
      %int1 = torch.constant.int 1
      %s = torch.aten.add.Tensor %in, %skip, %int1 : !torch.vtensor<[4,8],f32>, !torch.vtensor<[4,8],f32>, !torch.int -> !torch.vtensor<[4,8],f32>
      %w = pippy.param "wte.weight" : !torch.vtensor<[8,8],f32>
      %t = torch.aten.matmul %s, %w : !torch.vtensor<[4,8],f32>, !torch.vtensor<[8,8],f32> -> !torch.vtensor<[4,8],f32>
      pippy.yield %t : !torch.vtensor<[4,8],f32>
    }
    pippy.yield %o : !torch.vtensor<[4,8],f32>
  }
  return %out : !torch.vtensor<[4,8],f32>
}

// A pipeline with no tied group and a stage with no inputs.
// CHECK-LABEL: func.func @untied(
// CHECK:      pippy.pipeline -> !torch.vtensor<[2],f32> {
// CHECK-NEXT:   pippy.stage 0 () : () -> !torch.vtensor<[2],f32> {
func.func @untied() -> !torch.vtensor<[2],f32> {
  %0 = pippy.pipeline -> !torch.vtensor<[2],f32> {
    %a = pippy.stage 0 () : () -> !torch.vtensor<[2],f32> {
      %b = pippy.param "bias" : !torch.vtensor<[2],f32>
      pippy.yield %b : !torch.vtensor<[2],f32>
    }
    pippy.yield %a : !torch.vtensor<[2],f32>
  }
  return %0 : !torch.vtensor<[2],f32>
}

// The tensor-parallel ops and a sharded parameter round-trip.
// CHECK-LABEL: func.func @tensor_parallel(
// CHECK:      %[[W:.*]] = pippy.param "fc.weight" {pippy.shard = array<i64: 0, 2>} : !torch.vtensor<[2,4],f32>
// CHECK:      %[[C:.*]] = pippy.tp_copy %arg0 {tp = 2 : i64} : !torch.vtensor<[3,4],f32>
// CHECK:      pippy.tp_reduce %[[C]] {tp = 2 : i64} : !torch.vtensor<[3,4],f32>
// CHECK:      pippy.tp_embedding %[[W]], %arg1 {tp = 2 : i64} : !torch.vtensor<[2,4],f32>, !torch.vtensor<[3],si64> -> !torch.vtensor<[3,4],f32>
func.func @tensor_parallel(%x: !torch.vtensor<[3,4],f32>, %i: !torch.vtensor<[3],si64>) -> !torch.vtensor<[3,4],f32> {
  %w = pippy.param "fc.weight" {pippy.shard = array<i64: 0, 2>} : !torch.vtensor<[2,4],f32>
  %c = pippy.tp_copy %x {tp = 2} : !torch.vtensor<[3,4],f32>
  %r = pippy.tp_reduce %c {tp = 2} : !torch.vtensor<[3,4],f32>
  %e = pippy.tp_embedding %w, %i {tp = 2} : !torch.vtensor<[2,4],f32>, !torch.vtensor<[3],si64> -> !torch.vtensor<[3,4],f32>
  return %r : !torch.vtensor<[3,4],f32>
}
