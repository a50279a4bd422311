// Every place between ops has a list live: there is no split into two
// stages, and the error says why, for every policy and through
// --pippy-split.
// RUN: pippy-opt %s --pippy-place-split-points="stages=2" -verify-diagnostics -o /dev/null
// RUN: pippy-opt %s --pippy-place-split-points="stages=2 policy=params" -verify-diagnostics -o /dev/null
// RUN: pippy-opt %s --pippy-split="stages=2" -verify-diagnostics -o /dev/null

// expected-error @+1 {{cannot cut into 2 stages: only 0 places between ops have nothing but tensors live across them (lists, scalars and tensors of data-dependent shape cannot cross stages)}}
func.func @forward(%x: !torch.vtensor<[64,64],f32>) -> !torch.vtensor<[128,64],f32> {
  %int0 = torch.constant.int 0
  %l = torch.prim.ListConstruct %x, %x : (!torch.vtensor<[64,64],f32>, !torch.vtensor<[64,64],f32>) -> !torch.list<vtensor>
  %c = torch.aten.cat %l, %int0 : !torch.list<vtensor>, !torch.int -> !torch.vtensor<[128,64],f32>
  return %c : !torch.vtensor<[128,64],f32>
}
