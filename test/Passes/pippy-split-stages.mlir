// --pippy-split-stages: placing split points and outlining in one pass gives
// what the two passes give one after the other. A parameter used by two
// stages is in each, with a tied group; one also returned stays outside the
// pipeline too; constants and a list of constants go where they are used.
// RUN: pippy-opt %s --pippy-split-stages="stages=2 policy=uniform" | FileCheck %s
// RUN: pippy-opt %s --pippy-split-stages="stages=2 policy=uniform" | pippy-opt | FileCheck %s
// RUN: pippy-opt %s --pippy-split-stages="stages=2 policy=uniform" > %t.fused
// RUN: pippy-opt %s --pippy-place-split-points="stages=2 policy=uniform" --pippy-outline-stages > %t.two
// RUN: diff %t.fused %t.two
// RUN: pippy-opt %s --pippy-split-stages="stages=1" | FileCheck %s --check-prefix=SINGLE
// RUN: not pippy-opt %s --pippy-split-stages 2>&1 | FileCheck %s --check-prefix=NOSTAGES
// RUN: not pippy-opt %s --pippy-split-stages="stages=2 policy=even" 2>&1 | FileCheck %s --check-prefix=POLICY

func.func @forward(%x: !torch.vtensor<[2,4],f32>) -> (!torch.vtensor<[2,4],f32>, !torch.vtensor<[4,4],f32>) {
  %w0 = pippy.param "w0" : !torch.vtensor<[4,4],f32>
  %w1 = pippy.param "w1" : !torch.vtensor<[4,4],f32>
  %wr = pippy.param "wr" : !torch.vtensor<[4,4],f32>
  %int1 = torch.constant.int 1
  %int64 = torch.constant.int 4
  %shape = torch.prim.ListConstruct %int64 : (!torch.int) -> !torch.list<int>
  %a = torch.aten.mm %x, %w0 : !torch.vtensor<[2,4],f32>, !torch.vtensor<[4,4],f32> -> !torch.vtensor<[2,4],f32>
  %b = torch.aten.mm %a, %w1 : !torch.vtensor<[2,4],f32>, !torch.vtensor<[4,4],f32> -> !torch.vtensor<[2,4],f32>
  %c = torch.aten.add.Tensor %b, %a, %int1 : !torch.vtensor<[2,4],f32>, !torch.vtensor<[2,4],f32>, !torch.int -> !torch.vtensor<[2,4],f32>
  %d = torch.aten.mm %c, %w1 : !torch.vtensor<[2,4],f32>, !torch.vtensor<[4,4],f32> -> !torch.vtensor<[2,4],f32>
  %e = torch.aten.mm %d, %wr : !torch.vtensor<[2,4],f32>, !torch.vtensor<[4,4],f32> -> !torch.vtensor<[2,4],f32>
  %f = torch.aten.mm %e, %w0 : !torch.vtensor<[2,4],f32>, !torch.vtensor<[4,4],f32> -> !torch.vtensor<[2,4],f32>
  %g = torch.aten.view %f, %shape : !torch.vtensor<[2,4],f32>, !torch.list<int> -> !torch.vtensor<[8],f32>
  %h = torch.aten.view %g, %shape : !torch.vtensor<[8],f32>, !torch.list<int> -> !torch.vtensor<[2,4],f32>
  return %h, %wr : !torch.vtensor<[2,4],f32>, !torch.vtensor<[4,4],f32>
}

// CHECK-LABEL: func.func @forward(
// CHECK-NEXT:  %[[WR:.*]] = pippy.param "wr"
// CHECK-NEXT:  %[[P:.*]]:2 = pippy.pipeline tied [#pippy.tied_group<"w0", stages = [0, 1]>]
// CHECK-NEXT:    %[[S0:.*]] = pippy.stage 0 (%arg0)
// CHECK-NEXT:    ^bb0(%[[X0:.*]]: !torch.vtensor<[2,4],f32>):
// CHECK-NEXT:      %[[W0:.*]] = pippy.param "w0"
// CHECK-NEXT:      %[[A:.*]] = torch.aten.mm %[[X0]], %[[W0]]
// CHECK-NEXT:      %[[W1:.*]] = pippy.param "w1"
// CHECK-NEXT:      %[[B:.*]] = torch.aten.mm %[[A]], %[[W1]]
// CHECK-NEXT:      %[[ONE:.*]] = torch.constant.int 1
// CHECK-NEXT:      %[[C:.*]] = torch.aten.add.Tensor %[[B]], %[[A]], %[[ONE]]
// CHECK-NEXT:      %[[D:.*]] = torch.aten.mm %[[C]], %[[W1]]
// CHECK-NEXT:      pippy.yield %[[D]]
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[S1:.*]] = pippy.stage 1 (%[[S0]])
// CHECK-NEXT:    ^bb0(%[[X1:.*]]: !torch.vtensor<[2,4],f32>):
// CHECK-NEXT:      %[[WR1:.*]] = pippy.param "wr"
// CHECK-NEXT:      %[[E:.*]] = torch.aten.mm %[[X1]], %[[WR1]]
// CHECK-NEXT:      %[[W01:.*]] = pippy.param "w0"
// CHECK-NEXT:      %[[F:.*]] = torch.aten.mm %[[E]], %[[W01]]
// CHECK-NEXT:      %[[FOUR:.*]] = torch.constant.int 4
// CHECK-NEXT:      %[[SHAPE:.*]] = torch.prim.ListConstruct %[[FOUR]]
// CHECK-NEXT:      %[[G:.*]] = torch.aten.view %[[F]], %[[SHAPE]]
// CHECK-NEXT:      %[[H:.*]] = torch.aten.view %[[G]], %[[SHAPE]]
// CHECK-NEXT:      pippy.yield %[[H]]
// CHECK-NEXT:    }
// CHECK-NEXT:    pippy.yield %[[S1]], %[[WR]]
// CHECK-NEXT:  }
// CHECK-NEXT:  return %[[P]]#0, %[[P]]#1

// SINGLE:     pippy.pipeline
// SINGLE:     pippy.stage 0
// SINGLE-NOT: pippy.stage 1

// NOSTAGES: error: pippy-place-split-points needs stages=N with N >= 1

// POLICY: error: unknown split policy 'even'; expected balanced, params or uniform
