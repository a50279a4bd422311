module attributes {pippy.weights = "pipe.safetensors"} {
  func.func @forward(%x: !torch.vtensor<[4,8],f32>) -> !torch.vtensor<[4,4],f32> {
    %0 = pippy.pipeline -> !torch.vtensor<[4,4],f32> {
      %1 = pippy.stage 0 (%x) : (!torch.vtensor<[4,8],f32>) -> !torch.vtensor<[4,32],f32> {
      ^bb0(%a: !torch.vtensor<[4,8],f32>):
        %w0 = pippy.param "0.weight" : !torch.vtensor<[32,8],f32>
        %b0 = pippy.param "0.bias" : !torch.vtensor<[32],f32>
        %2 = torch.aten.linear %a, %w0, %b0 : !torch.vtensor<[4,8],f32>, !torch.vtensor<[32,8],f32>, !torch.vtensor<[32],f32> -> !torch.vtensor<[4,32],f32>
        %3 = torch.aten.tanh %2 : !torch.vtensor<[4,32],f32> -> !torch.vtensor<[4,32],f32>
        pippy.yield %3 : !torch.vtensor<[4,32],f32>
      }
      %4 = pippy.stage 1 (%1) : (!torch.vtensor<[4,32],f32>) -> !torch.vtensor<[4,4],f32> {
      ^bb0(%a: !torch.vtensor<[4,32],f32>):
        %2 = torch.aten.relu %a : !torch.vtensor<[4,32],f32> -> !torch.vtensor<[4,32],f32>
        %w1 = pippy.param "1.weight" : !torch.vtensor<[4,32],f32>
        %b1 = pippy.param "1.bias" : !torch.vtensor<[4],f32>
        %3 = torch.aten.linear %2, %w1, %b1 : !torch.vtensor<[4,32],f32>, !torch.vtensor<[4,32],f32>, !torch.vtensor<[4],f32> -> !torch.vtensor<[4,4],f32>
        pippy.yield %3 : !torch.vtensor<[4,4],f32>
      }
      pippy.yield %4 : !torch.vtensor<[4,4],f32>
    }
    return %0 : !torch.vtensor<[4,4],f32>
  }
}
