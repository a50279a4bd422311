//===- Allocator.h - Allocator settings of pippy's tools --------*- C++ -*-===//
//
// pippy-opt and pippy-import link mimalloc (see the top-level CMakeLists.txt).
// On a 100k-op model most of their memory is MLIR's operations, uniqued
// locations and attributes, touched once each: with 4 KiB pages the kernel's
// page faults were a sixth of a parse-and-print run (bench/RESULTS.md,
// "Session 11"). `useLargeAllocatorPages` asks mimalloc for 2 MiB pages
// (transparent huge pages, where the kernel grants them), unless the user set
// MIMALLOC_LARGE_OS_PAGES, which mimalloc then reads as usual. Without
// mimalloc it does nothing.
//
//===----------------------------------------------------------------------===//

#ifndef PIPPY_SUPPORT_ALLOCATOR_H
#define PIPPY_SUPPORT_ALLOCATOR_H

#include <cstdlib>

#if defined(__GLIBC__)
#include <malloc.h>
#endif
#ifdef PIPPY_USE_MIMALLOC
#include <cstdint>
#include <cstdio>
#include <mimalloc.h>
#include <sys/mman.h>
#endif

namespace pippy {

/// Call first thing in main: memory mimalloc takes from the system after
/// this call comes in 2 MiB pages.
inline void useLargeAllocatorPages() {
#ifdef PIPPY_USE_MIMALLOC
  if (std::getenv("MIMALLOC_LARGE_OS_PAGES"))
    return;
  // New segments: mimalloc advises the kernel itself once the option is on.
  mi_option_enable(mi_option_large_os_pages);
  // The segment the static constructors started (32 MiB with mimalloc 2.0)
  // was mapped before: advise the mapping that holds a fresh small block.
  // Its untouched 2 MiB ranges then fault in as one page each.
  void *probe = mi_malloc(16);
  auto at = reinterpret_cast<std::uintptr_t>(probe);
  mi_free(probe);
  std::FILE *maps = std::fopen("/proc/self/maps", "r");
  if (!maps)
    return;
  char line[512];
  while (std::fgets(line, sizeof line, maps)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line, "%lx-%lx", &lo, &hi) == 2 && lo <= at && at < hi) {
      ::madvise(reinterpret_cast<void *>(lo), hi - lo, MADV_HUGEPAGE);
      break;
    }
  }
  std::fclose(maps);
#endif
}

/// For pippy-run, which keeps glibc's allocator (libtorch's tensors come from
/// it). glibc maps each block above its threshold (128 KiB at first, raised
/// to the largest block freed) on its own and returns the heap's free top
/// to the kernel past twice that. A training step that frees and allocates
/// tensors of a few MiB, as `--defer-weight-grads` and
/// `--autograd-weight-grads` do, then faults in every page of them again:
/// 17k page faults a step, half the step's time, on the pipeline bench's
/// model (bench/RESULTS.md, "Session 11"). Blocks up to 32 MiB (glibc's
/// largest setting) now come from the heap, and up to 1 GiB of free heap is
/// kept for the next step. A process holds on to its peak use, which a
/// training step reaches again anyway. GLIBC_TUNABLES, when set, is left to
/// decide.
inline void keepFreedMemory() {
#if defined(__GLIBC__)
  if (std::getenv("GLIBC_TUNABLES"))
    return;
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

} // namespace pippy

#endif // PIPPY_SUPPORT_ALLOCATOR_H
