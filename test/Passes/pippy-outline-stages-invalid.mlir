// Outlining fails with one message naming the marker or value at fault.
// RUN: pippy-opt %s -split-input-file -verify-diagnostics --pippy-outline-stages

func.func @empty_first_stage(%x: !torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
  // expected-error @+1 {{'pippy.split_point' op leaves stage 0 empty: no op lies between it and the previous split point or the start of the function}}
  pippy.split_point
  %0 = torch.aten.relu %x : !torch.vtensor<[2],f32> -> !torch.vtensor<[2],f32>
  return %0 : !torch.vtensor<[2],f32>
}

// -----

func.func @empty_last_stage(%x: !torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
  %0 = torch.aten.relu %x : !torch.vtensor<[2],f32> -> !torch.vtensor<[2],f32>
  // expected-error @+1 {{'pippy.split_point' op leaves stage 1 empty: no op follows it before the end of the function}}
  pippy.split_point
  return %0 : !torch.vtensor<[2],f32>
}

// -----

func.func @two_markers_in_a_row(%x: !torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
  %0 = torch.aten.relu %x : !torch.vtensor<[2],f32> -> !torch.vtensor<[2],f32>
  pippy.split_point
  // expected-error @+1 {{'pippy.split_point' op leaves stage 1 empty}}
  pippy.split_point
  %1 = torch.aten.relu %0 : !torch.vtensor<[2],f32> -> !torch.vtensor<[2],f32>
  return %1 : !torch.vtensor<[2],f32>
}

// -----

func.func @non_tensor_crossing(%x: !torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
  %int0 = torch.constant.int 0
  // expected-error @+1 {{'torch.aten.size.int' op result of type '!torch.int' is made in stage 0 and used in stage 1; only tensors can cross stages}}
  %n = torch.aten.size.int %x, %int0 : !torch.vtensor<[2],f32>, !torch.int -> !torch.int
  pippy.split_point
  %0 = torch.aten.mul.Scalar %x, %n : !torch.vtensor<[2],f32>, !torch.int -> !torch.vtensor<[2],f32>
  return %0 : !torch.vtensor<[2],f32>
}

// -----

// A tensor whose shape depends on the data (pippy-import marks it) has only
// the example run's size in its type, so it cannot be sent.
func.func @data_dependent_shape(%x: !torch.vtensor<[4,8],f32>) -> !torch.vtensor<[],f32> {
  %int0 = torch.constant.int 0
  %0 = torch.aten.gt.Scalar %x, %int0 : !torch.vtensor<[4,8],f32>, !torch.int -> !torch.vtensor<[4,8],i1>
  // expected-error @+1 {{'torch.aten.masked_select' op result 0 has a shape that depends on the data; it is made in stage 0 and used in stage 1, but only tensors of static shape can cross stages}}
  %1 = torch.aten.masked_select %x, %0 {pippy.data_dependent_shape = array<i64: 0>} : !torch.vtensor<[4,8],f32>, !torch.vtensor<[4,8],i1> -> !torch.vtensor<[15],f32>
  pippy.split_point
  %none = torch.constant.none
  %2 = torch.aten.sum %1, %none : !torch.vtensor<[15],f32>, !torch.none -> !torch.vtensor<[],f32>
  return %2 : !torch.vtensor<[],f32>
}

// -----

// A buffer that a training-mode batch_norm updates in place is stage state:
// read in another stage, it would be a copy that never sees the updates.
func.func @running_stats_read_in_another_stage(%x: !torch.vtensor<[2,3],f32>) -> !torch.vtensor<[3],f32> {
  %mean = pippy.param "bn.running_mean" : !torch.vtensor<[3],f32>
  %var = pippy.param "bn.running_var" : !torch.vtensor<[3],f32>
  %none = torch.constant.none
  %true = torch.constant.bool true
  %momentum = torch.constant.float 1.000000e-01
  %eps = torch.constant.float 1.000000e-05
  // expected-note @+1 {{updated here}}
  %y = torch.aten.batch_norm %x, %none, %none, %mean, %var, %true, %momentum, %eps, %true : !torch.vtensor<[2,3],f32>, !torch.none, !torch.none, !torch.vtensor<[3],f32>, !torch.vtensor<[3],f32>, !torch.bool, !torch.float, !torch.float, !torch.bool -> !torch.vtensor<[2,3],f32>
  pippy.split_point
  %int1 = torch.constant.int 1
  // expected-error @+1 {{buffer 'bn.running_mean' is updated in place while training by 'torch.aten.batch_norm' in stage 0 and used here in stage 1: a stage's state cannot be shared; put every op that uses it in one stage}}
  %z = torch.aten.add.Tensor %mean, %mean, %int1 : !torch.vtensor<[3],f32>, !torch.vtensor<[3],f32>, !torch.int -> !torch.vtensor<[3],f32>
  return %z : !torch.vtensor<[3],f32>
}

// -----

// So is a buffer given a new value by pippy.assign.
func.func @assigned_buffer_read_in_another_stage(%x: !torch.vtensor<[],si64>) -> !torch.vtensor<[],si64> {
  %n = pippy.param "bn.num_batches_tracked" : !torch.vtensor<[],si64>
  %int1 = torch.constant.int 1
  // expected-error @+1 {{buffer 'bn.num_batches_tracked' is updated in place while training by 'pippy.assign' in stage 1 and used here in stage 0}}
  %n1 = torch.aten.add.Scalar %n, %int1, %int1 : !torch.vtensor<[],si64>, !torch.int, !torch.int -> !torch.vtensor<[],si64>
  pippy.split_point
  // expected-note @+1 {{updated here}}
  pippy.assign %n = %n1 : !torch.vtensor<[],si64>
  %y = torch.aten.add.Tensor %x, %n1, %int1 : !torch.vtensor<[],si64>, !torch.vtensor<[],si64>, !torch.int -> !torch.vtensor<[],si64>
  return %y : !torch.vtensor<[],si64>
}
