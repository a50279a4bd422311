//===- ActionClock.h - when a rank's actions ran ----------------*- C++ -*-===//
//
// Internal to runtime/: the times behind --trace and --metrics' busy time.
// On a CPU an action's time is the host's clock around it. On a GPU the
// host only queues an action's kernels, so the host's clock would time the
// queueing: each mark also records a CUDA event on libtorch's stream (the
// legacy default stream, which pippy never changes), and the step's spans
// are resolved at its end, once the device has run them (`settle`, after
// the step's loss was read). A span then lasts from its first event to its
// last, and starts where the step's first event lies on the host's
// timeline (the device is idle when a step starts: its loss was read).
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_RUNTIME_ACTIONCLOCK_H
#define PIPPY_RUNTIME_ACTIONCLOCK_H

#include "Reports.h"

#include <ATen/ATen.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace pippy::rt {

class ActionClock {
public:
  using Clock = std::chrono::steady_clock;
  /// A moment on the host, and on a GPU the event recorded then.
  struct Mark {
    Clock::time_point host;
    int event = -1;
  };
  /// What a closed span counts towards.
  enum class Counts { Busy, TraceOnly, Both };

  /// Times on `device`'s stream when it is a GPU and this build has CUDA's
  /// runtime; on the host's clock otherwise.
  explicit ActionClock(const at::Device &device);
  ~ActionClock();
  ActionClock(const ActionClock &) = delete;
  ActionClock &operator=(const ActionClock &) = delete;

  /// Where trace times start (after the ranks met: it is common to them).
  void startEpoch();
  Mark mark();
  /// Closes the span opened at `begin`, named `name` in the trace (step
  /// `step`, 0 outside training) when traced.
  void close(const Mark &begin, std::string name, Counts counts, int step);
  /// Resolves the spans closed since the last settle (on a GPU, waits for
  /// the device to reach the last of them).
  void settle();

  /// The busy seconds of the settled spans.
  double busySeconds() const { return busy; }
  /// The settled spans that are traced, when `tracing`.
  const std::vector<TraceEvent> &events() const { return traced; }
  void setTracing(bool on) { tracing = on; }
  /// Microseconds from the epoch to `t`, on the host.
  double micros(Clock::time_point t) const;
  bool onDevice() const { return static_cast<bool>(device); }

private:
  struct Span {
    std::string name;
    Counts counts;
    int step;
    Mark begin, end;
  };
  void add(const std::string &name, Counts counts, int step, double start,
           double seconds);

  class DeviceEvents; // CUDA's events, where this build has CUDA's runtime
  std::unique_ptr<DeviceEvents> device;
  std::vector<Span> pending;
  Clock::time_point epoch = Clock::now();
  double busy = 0;
  bool tracing = false;
  std::vector<TraceEvent> traced;
};

} // namespace pippy::rt

#endif // PIPPY_RUNTIME_ACTIONCLOCK_H
