//===- ActionClock.cpp - when a rank's actions ran ------------------------===//

#include "ActionClock.h"

#include "pippy/Runtime/Program.h"

#ifdef PIPPY_HAVE_CUDART
#include <cuda_runtime_api.h>
#endif

namespace pippy::rt {

#ifdef PIPPY_HAVE_CUDART
/// A pool of CUDA events, recorded in order through a step and reused by
/// the next; the step's first is its anchor on the host's timeline.
class ActionClock::DeviceEvents {
public:
  ~DeviceEvents() {
    for (cudaEvent_t e : pool)
      cudaEventDestroy(e);
  }
  int record(ActionClock::Clock::time_point host) {
    if (used == pool.size()) {
      cudaEvent_t e;
      check(cudaEventCreate(&e), "cannot create a CUDA event");
      pool.push_back(e);
    }
    check(cudaEventRecord(pool[used], cudaStreamLegacy),
          "cannot record a CUDA event");
    if (used == 0)
      anchor = host;
    return static_cast<int>(used++);
  }
  /// Waits for the last recorded event.
  void finish() {
    if (used > 0)
      check(cudaEventSynchronize(pool[used - 1]),
            "the GPU failed while running the step");
  }
  /// Seconds from event `from` to event `to`.
  double seconds(int from, int to) {
    float ms = 0;
    check(cudaEventElapsedTime(&ms, pool[from], pool[to]),
          "cannot time the step's actions on the GPU");
    return ms * 1e-3;
  }
  void reset() { used = 0; }
  ActionClock::Clock::time_point anchor;

private:
  static void check(cudaError_t status, const char *what) {
    if (status != cudaSuccess)
      throw RuntimeError(std::string("--trace/--metrics: ") + what + ": " +
                         cudaGetErrorString(status));
  }
  std::vector<cudaEvent_t> pool;
  size_t used = 0;
};
#else
/// No CUDA runtime in this build: never made (a GPU needs a CUDA build).
class ActionClock::DeviceEvents {
public:
  int record(ActionClock::Clock::time_point) { return -1; }
  void finish() {}
  double seconds(int, int) { return 0; }
  void reset() {}
  ActionClock::Clock::time_point anchor;
};
#endif

ActionClock::ActionClock(const at::Device &device) {
#ifdef PIPPY_HAVE_CUDART
  if (device.is_cuda())
    this->device = std::make_unique<DeviceEvents>();
#endif
}

ActionClock::~ActionClock() = default;

void ActionClock::startEpoch() { epoch = Clock::now(); }

double ActionClock::micros(Clock::time_point t) const {
  return std::chrono::duration<double, std::micro>(t - epoch).count();
}

ActionClock::Mark ActionClock::mark() {
  Mark m{Clock::now()};
  if (device)
    m.event = device->record(m.host);
  return m;
}

void ActionClock::close(const Mark &begin, std::string name, Counts counts,
                        int step) {
  Mark end = mark();
  if (!device) {
    add(name, counts, step, micros(begin.host),
        std::chrono::duration<double>(end.host - begin.host).count());
    return;
  }
  pending.push_back({std::move(name), counts, step, begin, end});
}

void ActionClock::settle() {
  if (!device || pending.empty())
    return;
  device->finish();
  double anchor = micros(device->anchor);
  for (const Span &s : pending)
    add(s.name, s.counts, s.step,
        anchor + device->seconds(0, s.begin.event) * 1e6,
        device->seconds(s.begin.event, s.end.event));
  pending.clear();
  device->reset();
}

void ActionClock::add(const std::string &name, Counts counts, int step,
                      double start, double seconds) {
  if (counts != Counts::TraceOnly)
    busy += seconds;
  if (tracing && counts != Counts::Busy)
    traced.push_back({name, start, seconds * 1e6, step});
}

} // namespace pippy::rt
