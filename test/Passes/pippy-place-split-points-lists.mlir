// A list (or a scalar) cannot cross stages, so no split point goes where
// one is live, whatever the policy. Here the cut after the list costs
// nothing to send (the list holds no bytes of its own) and would balance
// best; the placer cuts where only tensors cross instead (here after the
// cat).
// RUN: pippy-opt %s --pippy-place-split-points="stages=2" 2>&1 | FileCheck %s --check-prefix=BALANCED
// RUN: pippy-opt %s --pippy-place-split-points="stages=2 policy=uniform" 2>&1 | FileCheck %s --check-prefix=UNIFORM
// RUN: pippy-opt %s --pippy-split="stages=2" | FileCheck %s --check-prefix=SPLIT

func.func @forward(%x: !torch.vtensor<[64,64],f32>) -> !torch.vtensor<[128,64],f32> {
  %w = pippy.param "w" : !torch.vtensor<[64,64],f32>
  %int0 = torch.constant.int 0
  %a = torch.aten.mm %x, %w : !torch.vtensor<[64,64],f32>, !torch.vtensor<[64,64],f32> -> !torch.vtensor<[64,64],f32>
  %b = torch.aten.mm %a, %w : !torch.vtensor<[64,64],f32>, !torch.vtensor<[64,64],f32> -> !torch.vtensor<[64,64],f32>
  %l = torch.prim.ListConstruct %a, %b : (!torch.vtensor<[64,64],f32>, !torch.vtensor<[64,64],f32>) -> !torch.list<vtensor>
  %c = torch.aten.cat %l, %int0 : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[128,64],f32>
  %d = torch.aten.mm %c, %w : !torch.vtensor<[128,64],f32>, !torch.vtensor<[64,64],f32> -> !torch.vtensor<[128,64],f32>
  %e = torch.aten.relu %d : !torch.vtensor<[128,64],f32> -> !torch.vtensor<[128,64],f32>
  return %e : !torch.vtensor<[128,64],f32>
}

// BALANCED:      torch.aten.mm %arg0
// BALANCED-NEXT: torch.aten.mm
// BALANCED-NEXT: torch.prim.ListConstruct
// BALANCED-NEXT: torch.aten.cat
// BALANCED-NEXT: pippy.split_point
// UNIFORM:       torch.prim.ListConstruct
// UNIFORM-NEXT:  torch.aten.cat
// SPLIT:         pippy.stage 0
// SPLIT:         torch.aten.cat
// SPLIT:         pippy.stage 1
