//===- WaitFill.h - waits filled with later work ------------*- C++ -*-===//
//
// A rank about to wait for a message can do work that its own schedule
// puts later instead: pippy-run does so (--fill-waits), and the simulator
// predicts it. No early action sends anything (an early forward's SEND_F
// stays in its place), so every message is still sent when the schedule
// sends it and the checker's proof still holds. What may run early:
// - a weight gradient (W) whose input gradients (its I) are done, the first
//   W of its stage still to run: each weight's gradient still adds its
//   micro-batches in the schedule's order (the same bits);
// - a stage's optimizer step (STEP) once nothing of that stage is left to
//   run in the step: its parameters take the same update, sooner. Only
//   where the caller allows it (`steps`): pippy-run steps a stage alone
//   only when no gradient reaches it from elsewhere (no tied weights,
//   replicas or clipping by the global norm);
// - with --fill-forwards N, in a wait for a gradient, a forward (F) whose
//   input has come, after every F of its stage and of its micro-batch
//   before it: its stage's forwards keep their order. The caller bounds how
//   many run ahead of their place (forwardsAhead): each holds a
//   micro-batch's activations more.
// This picks them; runtime (no LLVM) and compiler share it.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_EXECUTABLE_WAITFILL_H
#define PIPPY_EXECUTABLE_WAITFILL_H

#include "pippy/Executable/Executable_generated.h"

#include <functional>
#include <map>
#include <optional>
#include <utility>
#include <vector>

namespace pippy::exe {

class WaitFill {
public:
  struct Step {
    ActionKind kind;
    int stage = 0, microbatch = 0;
  };

  /// A rank's actions, in its order.
  explicit WaitFill(const std::vector<Step> &actions)
      : kinds(actions.size()), stages(actions.size()),
        microbatches(actions.size()), inputOf(actions.size(), -1),
        early(actions.size(), false) {
    std::map<std::pair<int, int>, int> inputs, receives;
    for (size_t i = 0; i < actions.size(); ++i) {
      const Step &a = actions[i];
      kinds[i] = a.kind;
      stages[i] = a.stage;
      microbatches[i] = a.microbatch;
      std::pair<int, int> key{a.stage, a.microbatch};
      if (a.kind == ActionKind::BackwardInput)
        inputs[key] = static_cast<int>(i);
      else if (a.kind == ActionKind::RecvF)
        receives[key] = static_cast<int>(i);
      else if (a.kind == ActionKind::BackwardWeight) {
        if (auto it = inputs.find(key); it != inputs.end())
          inputOf[i] = it->second;
      } else if (a.kind == ActionKind::Forward)
        if (auto it = receives.find(key); it != receives.end())
          inputOf[i] = it->second;
    }
  }

  /// The W that can run now, when the rank's next action is `next`: the
  /// first in list order after `next` whose I is before `next` and with no
  /// W or B of its stage still to run before it.
  std::optional<size_t> pick(size_t next) const {
    std::vector<int> blocked; // stages with an earlier W or B still to run
    for (size_t j = next + 1; j < kinds.size(); ++j) {
      if (kinds[j] == ActionKind::Backward)
        blocked.push_back(stages[j]);
      if (kinds[j] != ActionKind::BackwardWeight || early[j])
        continue;
      bool stageBlocked = false;
      for (int s : blocked)
        stageBlocked |= s == stages[j];
      if (stageBlocked)
        continue;
      if (inputOf[j] >= 0 && static_cast<size_t>(inputOf[j]) < next)
        return j;
      blocked.push_back(stages[j]);
    }
    return std::nullopt;
  }
  /// The STEP that can run now, when the rank's next action is `next`: the
  /// first after `next` whose stage has nothing else left to run.
  std::optional<size_t> pickStep(size_t next) const {
    for (size_t j = next + 1; j < kinds.size(); ++j) {
      if (kinds[j] != ActionKind::Step || early[j])
        continue;
      bool pending = false;
      for (size_t k = next; k < j && !pending; ++k)
        pending = !early[k] && stages[k] == stages[j] && isWork(kinds[k]);
      if (!pending)
        return j;
    }
    return std::nullopt;
  }
  /// The forward (F) that can run now, when the rank's next action is
  /// `next`, with the receive of its input (RECV_F, if it has one and it is
  /// still to run): the first F after `next` with no F of its stage or of
  /// its micro-batch still to run before it (its stage's forwards keep
  /// their order; a stage of this rank that feeds it has run) and whose
  /// pending receive `arrived` says has come. Only while the rank waits for
  /// a gradient (RECV_B): one waiting for an activation is on the forward
  /// path, where an F run first would delay the F the next rank waits for.
  std::optional<std::pair<size_t, std::optional<size_t>>>
  pickForward(size_t next, const std::function<bool(size_t)> &arrived) const {
    if (kinds[next] != ActionKind::RecvB)
      return std::nullopt;
    for (size_t j = next + 1; j < kinds.size(); ++j) {
      if (kinds[j] != ActionKind::Forward || early[j])
        continue;
      bool blocked = false;
      for (size_t k = next; k < j && !blocked; ++k)
        blocked =
            !early[k] && kinds[k] == ActionKind::Forward &&
            (stages[k] == stages[j] || microbatches[k] == microbatches[j]);
      if (blocked)
        continue;
      std::optional<size_t> receive;
      if (inputOf[j] >= 0 && static_cast<size_t>(inputOf[j]) >= next &&
          !early[inputOf[j]]) {
        receive = static_cast<size_t>(inputOf[j]);
        if (*receive == next || !arrived(*receive))
          continue;
      }
      return std::pair{j, receive};
    }
    return std::nullopt;
  }
  /// How many forwards ran early that the rank's order has not reached
  /// at `next`: the micro-batches it holds beyond what its order holds.
  int forwardsAhead(size_t next) const {
    int ahead = 0;
    for (size_t j = next; j < kinds.size(); ++j)
      ahead += early[j] && kinds[j] == ActionKind::Forward;
    return ahead;
  }
  /// Action `index` ran early: the rank skips it when it gets there.
  void ranEarly(size_t index) { early[index] = true; }
  bool wasRunEarly(size_t index) const { return early[index]; }
  /// A new step: every action runs again.
  void reset() { early.assign(early.size(), false); }

private:
  /// What a stage must finish before its STEP: computing and receiving
  /// (a receive not yet waited for may still be in flight).
  static bool isWork(ActionKind kind) {
    return kind != ActionKind::SendF && kind != ActionKind::SendB &&
           kind != ActionKind::Step;
  }

  std::vector<ActionKind> kinds;
  std::vector<int> stages;
  std::vector<int> microbatches;
  /// Per W, the index of its I; per F, of its RECV_F (or -1).
  std::vector<int> inputOf;
  std::vector<bool> early;
};

} // namespace pippy::exe

#endif // PIPPY_EXECUTABLE_WAITFILL_H
