func.func @forward(%x: !torch.vtensor<[64,64],f32>) -> !torch.vtensor<[64,64],f32> {
  %w0 = pippy.param "w0" : !torch.vtensor<[64,64],f32>
  %w1 = pippy.param "w1" : !torch.vtensor<[64,64],f32>
  %w2 = pippy.param "w2" : !torch.vtensor<[64,64],f32>
  %w3 = pippy.param "w3" : !torch.vtensor<[64,64],f32>
  %big = pippy.param "big" : !torch.vtensor<[64,4096],f32>
  %none = torch.constant.none
  %false = torch.constant.bool false
  %s = torch.aten.sum.dim_IntList %big, %none, %false, %none : !torch.vtensor<[64,4096],f32>, !torch.none, !torch.bool, !torch.none -> !torch.vtensor<[64],f32>
  %a = torch.aten.mm %x, %w0 : !torch.vtensor<[64,64],f32>, !torch.vtensor<[64,64],f32> -> !torch.vtensor<[64,64],f32>
  %b = torch.aten.mm %a, %w1 : !torch.vtensor<[64,64],f32>, !torch.vtensor<[64,64],f32> -> !torch.vtensor<[64,64],f32>
  %c = torch.aten.mm %b, %w2 : !torch.vtensor<[64,64],f32>, !torch.vtensor<[64,64],f32> -> !torch.vtensor<[64,64],f32>
  %d = torch.aten.mm %c, %w3 : !torch.vtensor<[64,64],f32>, !torch.vtensor<[64,64],f32> -> !torch.vtensor<[64,64],f32>
  return %d : !torch.vtensor<[64,64],f32>
}
