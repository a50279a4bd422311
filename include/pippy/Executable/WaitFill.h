//===- WaitFill.h - waits filled with later work ------------*- C++ -*-===//
//
// A rank about to wait for a message can do work that its own schedule
// puts later instead: pippy-run does so (--fill-waits), and the simulator
// predicts it. Two kinds of action may run early, neither of which sends
// anything, so every message is still sent when the schedule sends it and
// the checker's proof still holds:
// - a weight gradient (W) whose input gradients (its I) are done, the first
//   W of its stage still to run: each weight's gradient still adds its
//   micro-batches in the schedule's order (the same bits);
// - a stage's optimizer step (STEP) once nothing of that stage is left to
//   run in the step: its parameters take the same update, sooner. Only
//   where the caller allows it (`steps`): pippy-run steps a stage alone
//   only when no gradient reaches it from elsewhere (no tied weights,
//   replicas or clipping by the global norm).
// This picks them; runtime (no LLVM) and compiler share it.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_EXECUTABLE_WAITFILL_H
#define PIPPY_EXECUTABLE_WAITFILL_H

#include "pippy/Executable/Executable_generated.h"

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
        inputOf(actions.size(), -1), early(actions.size(), false) {
    std::map<std::pair<int, int>, int> inputs;
    for (size_t i = 0; i < actions.size(); ++i) {
      const Step &a = actions[i];
      kinds[i] = a.kind;
      stages[i] = a.stage;
      if (a.kind == ActionKind::BackwardInput)
        inputs[{a.stage, a.microbatch}] = static_cast<int>(i);
      else if (a.kind == ActionKind::BackwardWeight)
        if (auto it = inputs.find({a.stage, a.microbatch}); it != inputs.end())
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
  std::vector<int> inputOf; ///< per W, the index of its I (or -1)
  std::vector<bool> early;
};

} // namespace pippy::exe

#endif // PIPPY_EXECUTABLE_WAITFILL_H
