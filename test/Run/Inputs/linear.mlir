module attributes {pippy.weights = "linear.safetensors"} {
  func.func @forward(%x: !torch.vtensor<[2,4],f32>) -> !torch.vtensor<[2,3],f32> {
    %w = pippy.param "fc.weight" : !torch.vtensor<[3,4],f32>
    %b = pippy.param "fc.bias" : !torch.vtensor<[3],f32>
    %0 = torch.aten.linear %x, %w, %b : !torch.vtensor<[2,4],f32>, !torch.vtensor<[3,4],f32>, !torch.vtensor<[3],f32> -> !torch.vtensor<[2,3],f32>
    return %0 : !torch.vtensor<[2,3],f32>
  }
}
