// Every invariant of the pipeline IR is checked, and each error names the
// problem with the expected and actual values.
// RUN: pippy-opt %s -split-input-file -verify-diagnostics

func.func @param_dynamic() {
  // expected-error @+1 {{'pippy.param' op type must have static sizes and a dtype; got '!torch.vtensor<[?,4],f32>'}}
  %0 = pippy.param "w" : !torch.vtensor<[?,4],f32>
  return
}

// -----

func.func @param_not_tensor() {
  // expected-error @+1 {{'pippy.param' op type must be a tensor; got '!torch.int'}}
  %0 = pippy.param "w" : !torch.int
  return
}

// -----

func.func @param_empty_name() {
  // expected-error @+1 {{'pippy.param' op has an empty name}}
  %0 = pippy.param "" : !torch.vtensor<[4],f32>
  return
}

// -----

func.func @param_name_not_string() {
  // expected-error @+1 {{custom op 'pippy.param' expected string}}
  %0 = pippy.param 5 : !torch.vtensor<[4],f32>
  return
}

// -----

func.func @stage_order(%x: !torch.vtensor<[2],f32>) {
  %0 = pippy.pipeline -> !torch.vtensor<[2],f32> {
    %a = pippy.stage 0 (%x) : (!torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
    ^bb0(%in: !torch.vtensor<[2],f32>):
      pippy.yield %in : !torch.vtensor<[2],f32>
    }
    // expected-error @+1 {{'pippy.stage' op has index 2; expected 1 (stage indices are 0, 1, 2, ... in order)}}
    %b = pippy.stage 2 (%a) : (!torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
    ^bb0(%in: !torch.vtensor<[2],f32>):
      pippy.yield %in : !torch.vtensor<[2],f32>
    }
    pippy.yield %b : !torch.vtensor<[2],f32>
  }
  return
}

// -----

func.func @stage_duplicate_index(%x: !torch.vtensor<[2],f32>) {
  %0 = pippy.pipeline -> !torch.vtensor<[2],f32> {
    %a = pippy.stage 0 (%x) : (!torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
    ^bb0(%in: !torch.vtensor<[2],f32>):
      pippy.yield %in : !torch.vtensor<[2],f32>
    }
    // expected-error @+1 {{'pippy.stage' op has index 0; expected 1 (stage indices are 0, 1, 2, ... in order)}}
    %b = pippy.stage 0 (%a) : (!torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
    ^bb0(%in: !torch.vtensor<[2],f32>):
      pippy.yield %in : !torch.vtensor<[2],f32>
    }
    pippy.yield %b : !torch.vtensor<[2],f32>
  }
  return
}

// -----

func.func @stage_yield_count(%x: !torch.vtensor<[2],f32>) {
  %0 = pippy.pipeline -> !torch.vtensor<[2],f32> {
    %a = pippy.stage 0 (%x) : (!torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
    ^bb0(%in: !torch.vtensor<[2],f32>):
      // expected-error @+1 {{'pippy.yield' op yields 2 values but the parent pippy.stage has 1 results}}
      pippy.yield %in, %in : !torch.vtensor<[2],f32>, !torch.vtensor<[2],f32>
    }
    pippy.yield %a : !torch.vtensor<[2],f32>
  }
  return
}

// -----

func.func @stage_yield_type(%x: !torch.vtensor<[2],f32>) {
  %0 = pippy.pipeline -> !torch.vtensor<[2],f32> {
    %a = pippy.stage 0 (%x) : (!torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
    ^bb0(%in: !torch.vtensor<[2],f32>):
      %c = torch.vtensor.literal(dense<1.0> : tensor<3xf32>) : !torch.vtensor<[3],f32>
      // expected-error @+1 {{'pippy.yield' op operand #0 has type '!torch.vtensor<[3],f32>' but the parent result has type '!torch.vtensor<[2],f32>'}}
      pippy.yield %c : !torch.vtensor<[3],f32>
    }
    pippy.yield %a : !torch.vtensor<[2],f32>
  }
  return
}

// -----

func.func @pipeline_yield_type(%x: !torch.vtensor<[2],f32>) {
  %0 = pippy.pipeline -> !torch.vtensor<[2],f64> {
    %a = pippy.stage 0 (%x) : (!torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
    ^bb0(%in: !torch.vtensor<[2],f32>):
      pippy.yield %in : !torch.vtensor<[2],f32>
    }
    // expected-error @+1 {{'pippy.yield' op operand #0 has type '!torch.vtensor<[2],f32>' but the parent result has type '!torch.vtensor<[2],f64>'}}
    pippy.yield %a : !torch.vtensor<[2],f32>
  }
  return
}

// -----

func.func @stage_arguments(%x: !torch.vtensor<[2],f32>) {
  %0 = pippy.pipeline -> !torch.vtensor<[2],f32> {
    // expected-error @+1 {{'pippy.stage' op has 1 inputs but its region takes 0 arguments}}
    %a = pippy.stage 0 (%x) : (!torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
      %c = torch.vtensor.literal(dense<1.0> : tensor<2xf32>) : !torch.vtensor<[2],f32>
      pippy.yield %c : !torch.vtensor<[2],f32>
    }
    pippy.yield %a : !torch.vtensor<[2],f32>
  }
  return
}

// -----

func.func @stage_uses_outer_value(%x: !torch.vtensor<[2],f32>) {
  %0 = pippy.pipeline -> !torch.vtensor<[2],f32> {
    // expected-note @+1 {{required by region isolation constraints}}
    %a = pippy.stage 0 () : () -> !torch.vtensor<[2],f32> {
      // expected-error @+1 {{'pippy.yield' op using value defined outside the region}}
      pippy.yield %x : !torch.vtensor<[2],f32>
    }
    pippy.yield %a : !torch.vtensor<[2],f32>
  }
  return
}

// -----

func.func @stage_uses_later_stage(%x: !torch.vtensor<[2],f32>) {
  %0 = pippy.pipeline -> !torch.vtensor<[2],f32> {
    // expected-error @+1 {{'pippy.stage' op input #0 comes from stage 1, which does not run before stage 0}}
    %a = pippy.stage 0 (%b) : (!torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
    ^bb0(%in: !torch.vtensor<[2],f32>):
      pippy.yield %in : !torch.vtensor<[2],f32>
    }
    // expected-note @+1 {{producer declared here}}
    %b = pippy.stage 1 (%x) : (!torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
    ^bb0(%in: !torch.vtensor<[2],f32>):
      pippy.yield %in : !torch.vtensor<[2],f32>
    }
    pippy.yield %b : !torch.vtensor<[2],f32>
  }
  return
}

// -----

func.func @duplicate_param() {
  %0 = pippy.pipeline -> !torch.vtensor<[2],f32> {
    %a = pippy.stage 0 () : () -> !torch.vtensor<[2],f32> {
      // expected-note @+1 {{first defined here}}
      %w = pippy.param "w" : !torch.vtensor<[2],f32>
      // expected-error @+1 {{'pippy.param' op duplicates parameter "w" in stage 0}}
      %v = pippy.param "w" : !torch.vtensor<[2],f32>
      pippy.yield %v : !torch.vtensor<[2],f32>
    }
    pippy.yield %a : !torch.vtensor<[2],f32>
  }
  return
}

// -----

func.func @shared_param_without_group() {
  // expected-error @+1 {{'pippy.pipeline' op parameter "w" is used by stages [0, 1] but has no tied group}}
  %0 = pippy.pipeline -> !torch.vtensor<[2],f32> {
    %a = pippy.stage 0 () : () -> !torch.vtensor<[2],f32> {
      %w = pippy.param "w" : !torch.vtensor<[2],f32>
      pippy.yield %w : !torch.vtensor<[2],f32>
    }
    %b = pippy.stage 1 () : () -> !torch.vtensor<[2],f32> {
      %w = pippy.param "w" : !torch.vtensor<[2],f32>
      pippy.yield %w : !torch.vtensor<[2],f32>
    }
    pippy.yield %b : !torch.vtensor<[2],f32>
  }
  return
}

// -----

func.func @tied_group_wrong_stages() {
  // expected-error @+1 {{'pippy.pipeline' op tied group "w" lists stages [0, 2] but the parameter is used by stages [0, 1]}}
  %0 = pippy.pipeline tied [#pippy.tied_group<"w", stages = [0, 2]>] -> !torch.vtensor<[2],f32> {
    %a = pippy.stage 0 () : () -> !torch.vtensor<[2],f32> {
      %w = pippy.param "w" : !torch.vtensor<[2],f32>
      pippy.yield %w : !torch.vtensor<[2],f32>
    }
    %b = pippy.stage 1 () : () -> !torch.vtensor<[2],f32> {
      %w = pippy.param "w" : !torch.vtensor<[2],f32>
      pippy.yield %w : !torch.vtensor<[2],f32>
    }
    pippy.yield %b : !torch.vtensor<[2],f32>
  }
  return
}

// -----

func.func @tied_group_single_user() {
  // expected-error @+1 {{'pippy.pipeline' op tied group "w" lists stages [0, 1] but the parameter is used by stages [0]}}
  %0 = pippy.pipeline tied [#pippy.tied_group<"w", stages = [0, 1]>] -> !torch.vtensor<[2],f32> {
    %a = pippy.stage 0 () : () -> !torch.vtensor<[2],f32> {
      %w = pippy.param "w" : !torch.vtensor<[2],f32>
      pippy.yield %w : !torch.vtensor<[2],f32>
    }
    %b = pippy.stage 1 (%a) : (!torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
    ^bb0(%in: !torch.vtensor<[2],f32>):
      pippy.yield %in : !torch.vtensor<[2],f32>
    }
    pippy.yield %b : !torch.vtensor<[2],f32>
  }
  return
}

// -----

func.func @tied_group_unused() {
  // expected-error @+1 {{'pippy.pipeline' op tied group "v" names a parameter that no stage uses}}
  %0 = pippy.pipeline tied [#pippy.tied_group<"v", stages = [0, 1]>] -> !torch.vtensor<[2],f32> {
    %a = pippy.stage 0 () : () -> !torch.vtensor<[2],f32> {
      %w = pippy.param "w" : !torch.vtensor<[2],f32>
      pippy.yield %w : !torch.vtensor<[2],f32>
    }
    %b = pippy.stage 1 (%a) : (!torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
    ^bb0(%in: !torch.vtensor<[2],f32>):
      pippy.yield %in : !torch.vtensor<[2],f32>
    }
    pippy.yield %b : !torch.vtensor<[2],f32>
  }
  return
}

// -----

func.func @tied_group_twice() {
  // expected-error @+1 {{'pippy.pipeline' op has two tied groups for "w"}}
  %0 = pippy.pipeline tied [#pippy.tied_group<"w", stages = [0, 1]>, #pippy.tied_group<"w", stages = [0, 1]>] -> !torch.vtensor<[2],f32> {
    %a = pippy.stage 0 () : () -> !torch.vtensor<[2],f32> {
      %w = pippy.param "w" : !torch.vtensor<[2],f32>
      pippy.yield %w : !torch.vtensor<[2],f32>
    }
    %b = pippy.stage 1 () : () -> !torch.vtensor<[2],f32> {
      %w = pippy.param "w" : !torch.vtensor<[2],f32>
      pippy.yield %w : !torch.vtensor<[2],f32>
    }
    pippy.yield %b : !torch.vtensor<[2],f32>
  }
  return
}

// -----

func.func @tied_type_mismatch() {
  %0 = pippy.pipeline tied [#pippy.tied_group<"w", stages = [0, 1]>] -> !torch.vtensor<[3],f32> {
    %a = pippy.stage 0 () : () -> !torch.vtensor<[2],f32> {
      // expected-note @+1 {{first use here}}
      %w = pippy.param "w" : !torch.vtensor<[2],f32>
      pippy.yield %w : !torch.vtensor<[2],f32>
    }
    %b = pippy.stage 1 () : () -> !torch.vtensor<[3],f32> {
      // expected-error @+1 {{'pippy.param' op has type '!torch.vtensor<[3],f32>' but parameter "w" has type '!torch.vtensor<[2],f32>' in an earlier stage}}
      %w = pippy.param "w" : !torch.vtensor<[3],f32>
      pippy.yield %w : !torch.vtensor<[3],f32>
    }
    pippy.yield %b : !torch.vtensor<[3],f32>
  }
  return
}

// -----

// expected-error @+1 {{tied group "w" must list its stages in increasing order}}
func.func @tied_group_unsorted() attributes {g = #pippy.tied_group<"w", stages = [1, 0]>} {
  return
}

// -----

// expected-error @+1 {{tied group "w" lists fewer than two stages}}
func.func @tied_group_one_stage() attributes {g = #pippy.tied_group<"w", stages = [1]>} {
  return
}

// -----

func.func @no_stages() {
  // expected-error @+1 {{'pippy.pipeline' op has no stages}}
  pippy.pipeline {
    pippy.yield
  }
  return
}

// -----

func.func @foreign_op_in_pipeline() {
  pippy.pipeline {
    // expected-error @+1 {{'torch.constant.int' op is not allowed in a pippy.pipeline body; expected pippy.stage or pippy.yield}}
    %c = torch.constant.int 1
    pippy.yield
  }
  return
}

// -----

func.func @split_point_in_stage() {
  %0 = pippy.pipeline -> !torch.vtensor<[2],f32> {
    // expected-note @+1 {{stage declared here}}
    %a = pippy.stage 0 () : () -> !torch.vtensor<[2],f32> {
      %w = pippy.param "w" : !torch.vtensor<[2],f32>
      // expected-error @+1 {{'pippy.split_point' op must not appear inside a pippy.stage: split points are consumed when stages are outlined}}
      pippy.split_point
      pippy.yield %w : !torch.vtensor<[2],f32>
    }
    pippy.yield %a : !torch.vtensor<[2],f32>
  }
  return
}

// -----

func.func @stage_outside_pipeline() {
  // expected-error @+1 {{'pippy.stage' op expects parent op 'pippy.pipeline'}}
  pippy.stage 0 () : () -> () {
    pippy.yield
  }
  return
}

// -----

func.func @shard_not_a_dimension() {
  // expected-error @+1 {{'pippy.param' op pippy.shard dimension 2 is not a dimension of a rank-2 tensor}}
  %0 = pippy.param "w" {pippy.shard = array<i64: 2, 2>} : !torch.vtensor<[4,4],f32>
  return
}

// -----

func.func @shard_one_part() {
  // expected-error @+1 {{'pippy.param' op pippy.shard needs at least 2 parts; got 1}}
  %0 = pippy.param "w" {pippy.shard = array<i64: 0, 1>} : !torch.vtensor<[4,4],f32>
  return
}

// -----

func.func @shard_malformed() {
  // expected-error @+1 {{'pippy.param' op pippy.shard must be array<i64: DIM, PARTS>; got 3 : i64}}
  %0 = pippy.param "w" {pippy.shard = 3} : !torch.vtensor<[4,4],f32>
  return
}

// -----

func.func @tp_copy_one_rank(%x: !torch.vtensor<[4],f32>) {
  // expected-error @+1 {{'pippy.tp_copy' op needs a group of at least 2 ranks; got tp = 1}}
  %0 = pippy.tp_copy %x {tp = 1} : !torch.vtensor<[4],f32>
  return
}

// -----

func.func @tp_reduce_integers(%x: !torch.vtensor<[4],si64>) {
  // expected-error @+1 {{'pippy.tp_reduce' op takes a floating-point torch tensor; got '!torch.vtensor<[4],si64>'}}
  %0 = pippy.tp_reduce %x {tp = 2} : !torch.vtensor<[4],si64>
  return
}

// -----

func.func @tp_embedding_float_indices(%w: !torch.vtensor<[4,8],f32>, %i: !torch.vtensor<[3],f32>) {
  // expected-error @+1 {{'pippy.tp_embedding' op takes integer indices; got '!torch.vtensor<[3],f32>'}}
  %0 = pippy.tp_embedding %w, %i {tp = 2} : !torch.vtensor<[4,8],f32>, !torch.vtensor<[3],f32> -> !torch.vtensor<[3,8],f32>
  return
}

// -----

func.func @tp_embedding_wrong_result(%w: !torch.vtensor<[4,8],f32>, %i: !torch.vtensor<[3],si64>) {
  // expected-error @+1 {{'pippy.tp_embedding' op result must be the indices' shape with the table's row size and dtype; got '!torch.vtensor<[3,4],f32>'}}
  %0 = pippy.tp_embedding %w, %i {tp = 2} : !torch.vtensor<[4,8],f32>, !torch.vtensor<[3],si64> -> !torch.vtensor<[3,4],f32>
  return
}
