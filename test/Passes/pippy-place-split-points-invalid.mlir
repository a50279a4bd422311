// Bad split requests are errors that say what is wrong.
// RUN: not pippy-opt %s --pippy-place-split-points="stages=3" 2>&1 | FileCheck %s --check-prefix=TOOMANY
// RUN: not pippy-opt %s --pippy-place-split-points="stages=2 policy=magic" 2>&1 | FileCheck %s --check-prefix=POLICY
// RUN: not pippy-opt %s --pippy-place-split-points 2>&1 | FileCheck %s --check-prefix=NOSTAGES
// TOOMANY: error: cannot cut 2 ops into 3 non-empty stages
// POLICY: error: unknown split policy 'magic'; expected balanced, params or uniform
// NOSTAGES: error: pippy-place-split-points needs stages=N with N >= 1
func.func @forward(%x: !torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
  %0 = torch.aten.relu %x : !torch.vtensor<[2],f32> -> !torch.vtensor<[2],f32>
  %1 = torch.aten.tanh %0 : !torch.vtensor<[2],f32> -> !torch.vtensor<[2],f32>
  return %1 : !torch.vtensor<[2],f32>
}
