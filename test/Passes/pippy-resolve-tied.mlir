// Tied weights: replicate keeps a copy per stage and the tied group;
// transmit keeps the weight in the group's first stage, which yields it, and
// the other stages take it as an operand. Relaying afterwards carries it
// through the stage in between like any skip connection.
// RUN: pippy-opt %s --pippy-resolve-tied | FileCheck %s --check-prefix=REPLICATE
// RUN: pippy-opt %s --pippy-resolve-tied=mode=transmit | FileCheck %s --check-prefix=TRANSMIT
// RUN: pippy-opt %s --pippy-resolve-tied=mode=transmit --pippy-resolve-skips=mode=relay | FileCheck %s --check-prefix=RELAY
// RUN: not pippy-opt %s --pippy-resolve-tied=mode=share 2>&1 | FileCheck %s --check-prefix=BAD

// REPLICATE: pippy.pipeline tied [#pippy.tied_group<"wte.weight", stages = [0, 2]>]

// TRANSMIT:      %[[P:.*]] = pippy.pipeline -> !torch.vtensor<[2,16],f32> {
// TRANSMIT:        %[[S0:.*]]:2 = pippy.stage 0 (%arg0) : (!torch.vtensor<[2,8],f32>) -> (!torch.vtensor<[2,8],f32>, !torch.vtensor<[16,8],f32>) {
// TRANSMIT:          %[[W:.*]] = pippy.param "wte.weight"
// TRANSMIT:          pippy.yield %{{.*}}, %[[W]] : !torch.vtensor<[2,8],f32>, !torch.vtensor<[16,8],f32>
// TRANSMIT:        %[[S1:.*]] = pippy.stage 1 (%[[S0]]#0)
// TRANSMIT:        %[[S2:.*]] = pippy.stage 2 (%[[S1]], %[[S0]]#1) : (!torch.vtensor<[2,8],f32>, !torch.vtensor<[16,8],f32>) -> !torch.vtensor<[2,16],f32> {
// TRANSMIT-NEXT:   ^bb0(%[[H:.*]]: !torch.vtensor<[2,8],f32>, %[[WA:.*]]: !torch.vtensor<[16,8],f32>):
// TRANSMIT-NOT:      pippy.param
// TRANSMIT:          torch.aten.linear %[[H]], %[[WA]], %{{.*}}
// TRANSMIT-NOT:  tied_group

// RELAY:        %[[S0:.*]]:2 = pippy.stage 0
// RELAY:        %[[S1:.*]]:2 = pippy.stage 1 (%[[S0]]#0, %[[S0]]#1)
// RELAY:        pippy.stage 2 (%[[S1]]#0, %[[S1]]#1)

// BAD: error: unknown tied-weight mode 'share'; expected replicate or transmit

func.func @forward(%arg0: !torch.vtensor<[2,8],f32>) -> !torch.vtensor<[2,16],f32> {
  %0 = pippy.pipeline tied [#pippy.tied_group<"wte.weight", stages = [0, 2]>] -> !torch.vtensor<[2,16],f32> {
    %1 = pippy.stage 0 (%arg0) : (!torch.vtensor<[2,8],f32>) -> !torch.vtensor<[2,8],f32> {
    ^bb0(%x: !torch.vtensor<[2,8],f32>):
      %w = pippy.param "wte.weight" : !torch.vtensor<[16,8],f32>
      %e = torch.aten.relu %w : !torch.vtensor<[16,8],f32> -> !torch.vtensor<[16,8],f32>
      %r = torch.aten.relu %x : !torch.vtensor<[2,8],f32> -> !torch.vtensor<[2,8],f32>
      pippy.yield %r : !torch.vtensor<[2,8],f32>
    }
    %2 = pippy.stage 1 (%1) : (!torch.vtensor<[2,8],f32>) -> !torch.vtensor<[2,8],f32> {
    ^bb0(%h: !torch.vtensor<[2,8],f32>):
      %r = torch.aten.tanh %h : !torch.vtensor<[2,8],f32> -> !torch.vtensor<[2,8],f32>
      pippy.yield %r : !torch.vtensor<[2,8],f32>
    }
    %3 = pippy.stage 2 (%2) : (!torch.vtensor<[2,8],f32>) -> !torch.vtensor<[2,16],f32> {
    ^bb0(%h: !torch.vtensor<[2,8],f32>):
      %w = pippy.param "wte.weight" : !torch.vtensor<[16,8],f32>
      %none = torch.constant.none
      %y = torch.aten.linear %h, %w, %none : !torch.vtensor<[2,8],f32>, !torch.vtensor<[16,8],f32>, !torch.none -> !torch.vtensor<[2,16],f32>
      pippy.yield %y : !torch.vtensor<[2,16],f32>
    }
    pippy.yield %3 : !torch.vtensor<[2,16],f32>
  }
  return %0 : !torch.vtensor<[2,16],f32>
}
