#pragma once
// A CPU emulator of the small part of CUDA that kernels/*.cu use, so that the real
// kernel sources run (and are tested) on machines without a GPU. Test-only: the
// tests/cuda/emu targets put this folder first on the include path, so
// `#include <cuda_runtime.h>` lands here, and define BGTQ_CUDA_EMULATION.
//
// Model: a launch runs its CTAs one after another (grid order and reversed on a
// kernel's alternate launches, see cta_order); the threads of a CTA are fibers on the
// launching thread or, under the sanitizers, real OS threads (std::thread; see "Fibers"
// below); __syncthreads is a barrier over the CTA, __syncwarp and the warp collectives
// (shuffles, mma.sync) use one barrier per warp. Dynamic shared
// memory is one buffer, poisoned before every CTA so reads of unwritten shared memory
// show up (0xFF bytes: NaN floats, -1 integers; on a kernel's alternate launches 0x55:
// large positive values, so a -1 that happens to be a kernel's own "none" value hides
// nothing); static __shared__ arrays become function-local statics in one section,
// poisoned the same way (one CTA runs at a time; not under AddressSanitizer, see
// below). Device memory is host memory.
// Memory ordering, as CUDA specifies it: __syncthreads and __syncwarp order memory
// between the threads they join; a shuffle or an mma.sync exchanges registers only.
// Under ThreadSanitizer the collectives' warp barrier is hidden from it (warp_rendezvous),
// so a kernel that leans on a shuffle where it needs a __syncwarp gets a race report. An
// asynchronous copy (bgtq_emu::cp_async, the kernels' cp.async) poisons its destination
// with 0xFF when issued and copies when its group is waited for (cp_wait), so a read
// before the wait sees NaN and a neighbour's access between issue and wait is a race.
// Launches run one after another; under ThreadSanitizer a launch's writes are ordered
// for the host and later launches only by a synchronising call, a plain launch or, for a
// launch overlapped with its predecessor, the kernel's grid_dependency_wait (stream_launch).
// Not emulated: concurrency between CTAs, warp divergence timing, performance. Launch
// failures: a dynamic shared-memory size above the kernel's limit (48 KB unless
// raised), and copies a thread issued but never waited for (cudaErrorLaunchFailure).
#ifndef BGTQ_CUDA_EMULATION
#define BGTQ_CUDA_EMULATION 1
#endif

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#include <ucontext.h>
#endif

// ------------------------------------------------------------------ language
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
// static __shared__ variables: function-local statics in one section, so that the
// emulator can poison them all before every CTA (poison_static_shared). GCC ignores the
// section of a function template's statics (they go to COMDAT .bss, unpoisoned), and
// rejects one in an inline function (__device__ __forceinline__) beside a non-inline
// kernel's ("section type conflict"): only non-template, non-inline kernels may declare
// static shared memory; templates and helpers use dynamic_smem, as the decode kernels do.
// Under AddressSanitizer they stay plain statics: neither GCC nor clang puts redzones
// around variables in a named section, and bounds checks are worth more there.
#if defined(__SANITIZE_ADDRESS__)
#define BGTQ_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BGTQ_EMU_ASAN 1
#endif
#endif
#if defined(BGTQ_EMU_ASAN)
#define __shared__ static
#else
#define __shared__ static __attribute__((section("bgtq_emu_smem")))
#endif
#define __align__(n) alignas(n)

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct alignas(16) float4 {
  float x, y, z, w;
};

inline thread_local dim3 threadIdx;
inline thread_local dim3 blockIdx;
inline thread_local dim3 blockDim;  // per thread: an overlapped launch's threads outlive the host's view
inline thread_local dim3 gridDim;

using std::max;
using std::min;

// ------------------------------------------------------------------ runtime types
enum cudaError_t : int {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidDeviceFunction = 98,
  cudaErrorNoDevice = 100,
  cudaErrorLaunchFailure = 719,
};
using cudaError = cudaError_t;
struct CUstream_st;
using cudaStream_t = CUstream_st*;
struct CUevent_st;
using cudaEvent_t = CUevent_st*;
enum cudaMemcpyKind : int {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};
enum cudaDeviceAttr : int {
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97
};
enum cudaFuncAttribute : int { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
struct cudaDeviceProp {
  char name[256];
  std::size_t totalGlobalMem;
  int multiProcessorCount;
  int major, minor;
  int l2CacheSize;
};

#if defined(__SANITIZE_THREAD__)
#define BGTQ_EMU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define BGTQ_EMU_TSAN 1
#endif
#endif
#if defined(BGTQ_EMU_TSAN)
extern "C" void AnnotateIgnoreSyncBegin(const char*, int);
extern "C" void AnnotateIgnoreSyncEnd(const char*, int);
extern "C" void AnnotateIgnoreReadsBegin(const char*, int);
extern "C" void AnnotateIgnoreReadsEnd(const char*, int);
extern "C" void AnnotateIgnoreWritesBegin(const char*, int);
extern "C" void AnnotateIgnoreWritesEnd(const char*, int);
extern "C" void __tsan_acquire(void*);
extern "C" void __tsan_release(void*);
extern "C" void* __tsan_get_current_fiber();
extern "C" void* __tsan_create_fiber(unsigned flags);
extern "C" void __tsan_destroy_fiber(void* fiber);
extern "C" void __tsan_switch_to_fiber(void* fiber, unsigned flags);
#endif

namespace bgtq_emu {
//! For its lifetime, hides from ThreadSanitizer this thread's synchronisation and, with
//! `accesses`, its memory accesses (AnnotateIgnoreSync/Reads/Writes, nested in that order).
//! Nothing without ThreadSanitizer.
class tsan_blind {
 public:
  explicit tsan_blind(bool accesses) : accesses_(accesses) {
#if defined(BGTQ_EMU_TSAN)
    AnnotateIgnoreSyncBegin(__FILE__, __LINE__);
    if (accesses_) {
      AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
      AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
    }
#endif
  }
  ~tsan_blind() {
#if defined(BGTQ_EMU_TSAN)
    if (accesses_) {
      AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
      AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
    }
    AnnotateIgnoreSyncEnd(__FILE__, __LINE__);
#endif
  }
  tsan_blind(const tsan_blind&) = delete;
  tsan_blind& operator=(const tsan_blind&) = delete;

 private:
  [[maybe_unused]] bool accesses_;
};

//! SMs the emulated device reports: few, so that automatic split plans stay small
//! (each emulated CTA costs barriers); tests force larger split counts.
inline constexpr int emulated_sms = 16;
//! Device memory the emulated device reports (cudaDeviceProp::totalGlobalMem); a larger
//! cudaMalloc fails with cudaErrorMemoryAllocation, as on a device.
inline constexpr std::size_t emulated_memory = std::size_t{8} << 30;
//! Largest dynamic shared memory a kernel may opt into (sm_90).
inline constexpr std::size_t max_dynamic_smem = 227u * 1024u;

// Fibers. Unless AddressSanitizer is on, the threads of a CTA run as fibers on the
// launching thread, not as OS threads: a barrier is then a switch in user space instead
// of a futex wake per waiting thread (with 128 threads on 2 cores most of an emulated
// test's time went to the kernel's scheduler). The semantics are the same: a thread
// runs until it reaches a barrier or a warp collective, the others run meanwhile
// (round-robin), and a barrier releases once all of its threads arrived. Under
// ThreadSanitizer each CTA thread is one of its fibers (__tsan_create_fiber, switched to
// without synchronisation), with a clock of its own as an OS thread has: a barrier tells
// it what it orders (each generation of an emu_barrier releases and acquires a sync
// object of its own), and the emulator's bookkeeping between the threads (the
// per-thread variables swapped at each switch, the scheduler's counters, the copy
// queues) is hidden from it, so it reports what it reports with OS threads
// (race_probe:* checks both). Under AddressSanitizer the threads stay OS threads (it is
// not told of the stack switches); BGTQ_EMU_THREADS=os selects OS threads in any build
// (=fibers is the default where available). A launch whose threads all wait at barriers
// no other thread will reach (a __syncthreads some threads skip) is reported and
// aborted, where OS threads would hang until ctest's timeout.
#if !defined(BGTQ_EMU_ASAN) && defined(__linux__)
#define BGTQ_EMU_FIBERS 1
#endif
struct fiber_run;
//! The fiber launch running on this OS thread (null in OS-thread mode and on the host).
inline thread_local fiber_run* fiber_sched = nullptr;
inline void fiber_arrive();  // counts progress for the deadlock check
inline void fiber_yield();   // back to the scheduler; resumed on its next round

//! ThreadSanitizer's release and acquire (nothing without it; ignored in a tsan_blind).
inline void tsan_release([[maybe_unused]] void* p) {
#if defined(BGTQ_EMU_TSAN)
  __tsan_release(p);
#endif
}
inline void tsan_acquire([[maybe_unused]] void* p) {
#if defined(BGTQ_EMU_TSAN)
  __tsan_acquire(p);
#endif
}

//! __syncthreads / warp barrier: a std::barrier over OS threads, or a counter over fibers.
//! ThreadSanitizer is shown the ordering through `sync`, one byte per generation parity:
//! a thread releases its generation's byte on arrival and acquires it on leaving. One
//! object for all generations would be too much: the last thread to arrive runs on into
//! the next phase and may arrive at the next barrier (releasing) before the others
//! resume, who would then be ordered after its next-phase accesses. Generation g + 2
//! cannot begin before every thread has left g. The barrier's own synchronisation is
//! hidden from ThreadSanitizer in both modes: over OS threads libstdc++'s std::barrier
//! synchronises through atomics that every generation shares (its tree of arrival
//! tickets, the wait pool's waiter count and version, picked by hashing the address),
//! which made exactly that mistake (race_probe:os_threads' "next_phase missing" passed
//! unreported about once in 40 runs, when thread 0 woke late from the first barrier).
//! Allocated per launch: its memory, freed, takes ThreadSanitizer's sync state with it
//! (none between launches).
struct emu_barrier {
  //! Completed generations, in both modes: over fibers the last thread to arrive counts
  //! one, over OS threads the std::barrier's completion step does, which runs before any
  //! waiting thread is released, so a thread about to arrive reads its own generation.
  //! (Behind a pointer: the warps' barriers live in a vector, and an atomic cannot move.)
  std::unique_ptr<std::atomic<std::uint64_t>> generation;
  struct count_phase {
    std::atomic<std::uint64_t>* generation;
    void operator()() const noexcept { generation->fetch_add(1, std::memory_order_relaxed); }
  };
  std::unique_ptr<std::barrier<count_phase>> os;  // OS threads only
  std::unique_ptr<char[]> sync;
  unsigned expected = 0, arrived = 0;  // fibers only
  void reset(unsigned n, bool fibers) {
    expected = n;
    arrived = 0;
    os.reset();  // before the counter its completion step points to
    generation = std::make_unique<std::atomic<std::uint64_t>>(0);
    sync = std::make_unique<char[]>(2);
    if (!fibers) os = std::make_unique<std::barrier<count_phase>>(static_cast<std::ptrdiff_t>(n), count_phase{generation.get()});
  }
  void arrive_and_wait() {
    char* gen_sync = nullptr;
    std::uint64_t g = 0;
    {
      const tsan_blind blind(true);
      g = generation->load(std::memory_order_relaxed);
      gen_sync = &sync[g & 1];
    }
    tsan_release(gen_sync);
    {
      const tsan_blind blind(true);  // the counters and waits are the emulator's, not the kernel's
      if (os) {
        os->arrive_and_wait();
      } else {
        fiber_arrive();
        if (++arrived == expected) {
          arrived = 0;
          generation->fetch_add(1, std::memory_order_relaxed);
        } else {
          while (generation->load(std::memory_order_relaxed) == g) fiber_yield();
        }
      }
    }
    tsan_acquire(gen_sync);
  }
};

struct launch_state {
  std::vector<unsigned char> smem;  // dynamic shared memory of the running CTA
  emu_barrier block;  // __syncthreads
  std::vector<emu_barrier> warps;
  std::vector<std::uint64_t> shfl;  // [warp][32] exchange slots
  std::vector<std::uint32_t> mma;   // [warp][32][6] mma fragment slots (a[4], b[2])
  std::atomic<int> any[3] = {0, 0, 0};  // __syncthreads_or: call n of a thread ORs into any[n % 3]
  std::atomic<bool> copies_left{false};  // a thread ended a CTA with copies not waited for
  std::shared_ptr<const void> args;  // the kernel's arguments
  char done = 0;                  // its address: the launch's threads release it at exit (TSan)
  void* wait_for = nullptr;       // an overlapped launch: the predecessor's `done` (grid_dependency_wait)
};
//! Launches alternate between two states, so that an overlapped launch's predecessor
//! (whose threads the host has not synchronised with, under TSan) keeps its own.
inline launch_state slots[2];
inline unsigned launches = 0;
inline thread_local launch_state* current = nullptr;  // the state of the launch a kernel thread runs
inline launch_state& state() { return *current; }
inline void* dynamic_smem() { return state().smem.data(); }

//! The CUDA error state the emulated runtime reports (cudaGetLastError).
inline thread_local int last_error = 0;
//! A runtime call or launch that fails leaves its error as the thread's last error, as
//! the CUDA runtime does (a later cudaGetLastError returns it, a non-sticky one once).
inline cudaError_t fail(cudaError_t e) {
  last_error = e;
  return e;
}
//! Tests: what the occupancy query reports instead of its model, so that a decode's
//! run-time fallback (the tensor-core kernel cannot be planned) can be driven without a
//! device that provokes it. error != 0: the query fails with that cudaError_t;
//! blocks >= 0: it succeeds with that many CTAs per SM (0: none fits). Tests set it
//! through bgtq_emu::scoped_occupancy_fault, which restores the model.
struct occupancy_fault_state {
  std::atomic<int> error{0};
  std::atomic<int> blocks{-1};
};
inline occupancy_fault_state occupancy_fault;
class scoped_occupancy_fault {
 public:
  scoped_occupancy_fault(int error, int blocks) {
    occupancy_fault.error = error;
    occupancy_fault.blocks = blocks;
  }
  ~scoped_occupancy_fault() {
    occupancy_fault.error = 0;
    occupancy_fault.blocks = -1;
  }
  scoped_occupancy_fault(const scoped_occupancy_fault&) = delete;
  scoped_occupancy_fault& operator=(const scoped_occupancy_fault&) = delete;
};
}  // namespace bgtq_emu
// The linker's bounds of the static __shared__ section (null when no kernel has any).
extern "C" unsigned char __start_bgtq_emu_smem[] __attribute__((weak));
extern "C" unsigned char __stop_bgtq_emu_smem[] __attribute__((weak));
namespace bgtq_emu {
//! Fills every static __shared__ variable of every kernel with `poison`, as the dynamic
//! shared memory is before each CTA: a CTA that reads its static shared memory before
//! writing it gets the poison, not what the previous CTA left there (on a device the
//! contents at CTA start are undefined). Only one CTA runs at a time; ThreadSanitizer
//! is not shown these writes (a later launch's threads are ordered after them by its
//! own barriers; the statics of other kernels are not theirs to order). The compiler
//! does not see these bytes as the kernels' statics: what keeps a kernel's store from
//! being moved past them is the CTA barrier (atomics) between the two.
inline void poison_static_shared(unsigned char poison) {
  if (__start_bgtq_emu_smem == nullptr) return;  // none linked in (or AddressSanitizer)
  const tsan_blind blind(true);
  for (unsigned char* b = __start_bgtq_emu_smem; b != __stop_bgtq_emu_smem; ++b) *b = poison;
}
//! Per kernel: the largest dynamic shared memory a launch may use (cudaFuncSetAttribute);
//! unlisted kernels get the default 48 KB (static shared memory is not modelled).
inline std::mutex limits_mu;
inline std::map<const void*, std::size_t>& smem_limits() {
  static std::map<const void*, std::size_t> m;
  return m;
}
inline std::size_t smem_limit(const void* k) {
  std::lock_guard<std::mutex> lock(limits_mu);
  const auto it = smem_limits().find(k);
  return it == smem_limits().end() ? std::size_t{48} * 1024 : it->second;
}

inline unsigned flat_tid() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }

//! One thread's asynchronous copies (cp.async): each belongs to the group that was open
//! when it was issued (group g is committed once `committed` > g).
struct async_copy {
  void* dst;
  const void* src;
  std::size_t n;
  std::uint64_t group;
};
struct async_queue {
  std::vector<async_copy> q;
  std::size_t head = 0;        // q[head..] not done yet
  std::uint64_t committed = 0; // cp.async.commit_group calls
};
inline thread_local async_queue copies;
//! __syncthreads_or calls this thread made in its launch (each launch's threads start at 0).
inline thread_local unsigned syncthreads_or_calls = 0;

//! cp.async: the destination is undefined until the copy's group is waited for (0xFF here).
//! (Its queue is the emulator's: hidden from ThreadSanitizer, which sees the poisoning
//! and the copy at the wait as this thread's accesses.)
inline void cp_async(void* dst, const void* src, std::size_t n) {
  std::memset(dst, 0xFF, n);
  const tsan_blind blind(true);
  copies.q.push_back({dst, src, n, copies.committed});
}
inline void cp_commit() {
  const tsan_blind blind(true);
  ++copies.committed;
}
//! cp.async.wait_group n: completes the committed groups but the newest n.
inline void cp_wait(int n) {
  for (;;) {
    async_copy a{};
    {
      const tsan_blind blind(true);
      async_queue& c = copies;
      if (c.head == c.q.size() || c.q[c.head].group + static_cast<std::uint64_t>(n) >= c.committed) break;
      a = c.q[c.head++];
    }
    std::memcpy(a.dst, a.src, a.n);
  }
  const tsan_blind blind(true);
  async_queue& c = copies;
  if (c.head == c.q.size()) {
    c.q.clear();
    c.head = 0;
  }
}
//! End of a CTA: copies never waited for are a kernel bug (the launch fails).
inline void cp_drain() {
  bool left = false;
  {
    const tsan_blind blind(true);
    async_queue& c = copies;
    left = c.head < c.q.size();
    c.q.clear();
    c.head = 0;
  }
  if (left) state().copies_left.store(true);
}

#if defined(BGTQ_EMU_FIBERS)
// (Not with CET shadow stacks, -fcf-protection=return: a `ret` onto another fiber's
// stack would not match the shadow stack; glibc's swapcontext switches both.)
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !(defined(__CET__) && (__CET__ & 2))
#define BGTQ_EMU_FIBER_ASM 1
//! Saves the callee-saved registers, MXCSR and the x87 control word on the current stack,
//! stores its pointer in *from and continues on the stack `to` (saved the same way, or
//! prepared by fiber_stack_init). glibc's swapcontext does this plus two signal-mask
//! system calls per switch, which were 40% of an emulated test's time.
__attribute__((naked, noinline)) inline void fiber_switch(void** /*from*/, void* /*to*/) {
  asm("pushq %rbp\n\t"
      "pushq %rbx\n\t"
      "pushq %r12\n\t"
      "pushq %r13\n\t"
      "pushq %r14\n\t"
      "pushq %r15\n\t"
      "subq $16, %rsp\n\t"
      "stmxcsr 8(%rsp)\n\t"
      "fnstcw (%rsp)\n\t"
      "movq %rsp, (%rdi)\n\t"
      "movq %rsi, %rsp\n\t"
      "fldcw (%rsp)\n\t"
      "ldmxcsr 8(%rsp)\n\t"
      "addq $16, %rsp\n\t"
      "popq %r15\n\t"
      "popq %r14\n\t"
      "popq %r13\n\t"
      "popq %r12\n\t"
      "popq %rbx\n\t"
      "popq %rbp\n\t"
      "ret");
}
#endif
//! A fiber's own context, kept from launch to launch: its stack (256 KiB, reserved, not
//! committed, under a PROT_NONE guard page, so an overflow faults instead of corrupting
//! a neighbour), where it was switched out, and its ThreadSanitizer fiber. A fiber is
//! created once and runs fiber_entry's loop, one launch's thread per turn: creating
//! ThreadSanitizer's fibers per launch (a large zeroed state each) took most of the time.
struct fiber_slot {
#if defined(BGTQ_EMU_FIBER_ASM)
  void* sp = nullptr;
#else
  ucontext_t ctx{};
#endif
  void* tsan = nullptr;
};
//! One CTA thread of the running launch: its slot and, while it is switched out, its
//! values of the per-thread variables (swapped with the OS thread's on every switch; they
//! start as a new OS thread's do, and the thread body sets them).
struct fiber {
  fiber_slot* slot = nullptr;
  dim3 thread_idx, block_idx, block_dim, grid_dim;
  launch_state* state = nullptr;
  async_queue copies;
  unsigned or_calls = 0;
  bool done = false;
  void exchange() {
    std::swap(threadIdx, thread_idx);
    std::swap(blockIdx, block_idx);
    std::swap(blockDim, block_dim);
    std::swap(gridDim, grid_dim);
    std::swap(current, state);
    std::swap(bgtq_emu::copies, copies);
    std::swap(syncthreads_or_calls, or_calls);
  }
};
struct fiber_run {
#if defined(BGTQ_EMU_FIBER_ASM)
  void* scheduler = nullptr;
#else
  ucontext_t scheduler{};
#endif
  void* tsan_scheduler = nullptr;  // ThreadSanitizer's fiber of the launching thread
  std::vector<fiber> fibers;
  unsigned running = 0;
  std::uint64_t events = 0;  // barrier arrivals and ended threads: progress
  void (*body)(const void*, unsigned) = nullptr;
  const void* body_arg = nullptr;
  char start = 0;  // its address: the launch's setup, released before its threads run
};
//! Under ThreadSanitizer: the fiber that runs from the next switch on, not ordered
//! after this one (no_sync). Called right before the switch: the accesses after it are
//! the next fiber's.
inline void tsan_switch([[maybe_unused]] void* to) {
#if defined(BGTQ_EMU_TSAN)
  __tsan_switch_to_fiber(to, 1u /* __tsan_switch_to_fiber_no_sync */);
#endif
}
// The scheduler's state is the emulator's: every access to it from a fiber is hidden
// from ThreadSanitizer (tsan_blind), which sees the kernel's accesses only.
inline void fiber_arrive() {
  const tsan_blind blind(true);
  ++fiber_sched->events;
}
inline void fiber_yield() {
  const tsan_blind blind(true);  // (this fiber's: it ends after the fiber is resumed)
  fiber_run& r = *fiber_sched;
  fiber_slot& self = *r.fibers[r.running].slot;
#if defined(BGTQ_EMU_FIBER_ASM)
  void* const to = r.scheduler;
  tsan_switch(r.tsan_scheduler);
  fiber_switch(&self.sp, to);
#else
  tsan_switch(r.tsan_scheduler);
  swapcontext(&self.ctx, &r.scheduler);
#endif
}
//! A fiber's life: one thread of each launch that runs it, then back to the scheduler,
//! which resumes it (here) for its next launch. Its ThreadSanitizer clock carries on from
//! launch to launch; the launches of the other parity run on other fibers (fiber_slots),
//! so only a launch ordered before this one anyway (by host_sync) shares its fibers.
[[noreturn]] inline void fiber_entry() {
  for (;;) {
    fiber_run* r = nullptr;
    unsigned t = 0;
    void (*body)(const void*, unsigned) = nullptr;
    const void* arg = nullptr;
    {
      const tsan_blind blind(true);
      r = fiber_sched;
      t = r->running;
      body = r->body;
      arg = r->body_arg;
    }
    tsan_acquire(&r->start);  // ordered after the launch's setup, as a new OS thread is
    body(arg, t);
    {
      const tsan_blind blind(true);
      r->fibers[t].done = true;
      ++r->events;
    }
    fiber_yield();
  }
}
#if defined(BGTQ_EMU_FIBER_ASM)
//! A new fiber's stack below `top` (16-byte aligned): what fiber_switch pops (control
//! words, six zero registers), then fiber_entry as the return address, placed so that
//! fiber_entry starts with the stack alignment of a called function.
inline void* fiber_stack_init(unsigned char* top) {
  auto* w = reinterpret_cast<std::uint64_t*>(top) - 2;  // w: the return address, 16-byte aligned
  w[0] = reinterpret_cast<std::uint64_t>(&fiber_entry);
  w[1] = 0;
  std::uint64_t* sp = w - 8;  // 2 words of control words, 6 registers
  for (int i = 0; i < 8; ++i) sp[i] = 0;
  std::uint32_t mxcsr = 0;
  std::uint16_t fcw = 0;
  asm volatile("stmxcsr %0" : "=m"(mxcsr));
  asm volatile("fnstcw %0" : "=m"(fcw));
  std::memcpy(reinterpret_cast<unsigned char*>(sp), &fcw, sizeof fcw);
  std::memcpy(reinterpret_cast<unsigned char*>(sp) + 8, &mxcsr, sizeof mxcsr);
  return sp;
}
#endif
inline constexpr std::size_t fiber_stack_bytes = std::size_t{256} << 10;
//! The fibers of the launches of one parity (even, odd), at least n of them: a launch
//! and its predecessor, which may overlap it, never share a fiber (launch_state slots).
inline std::vector<fiber_slot>& fiber_slots(unsigned parity, unsigned n) {
  static std::vector<fiber_slot> pools[2];  // (element addresses are kept: reserved once)
  std::vector<fiber_slot>& pool = pools[parity];
  pool.reserve(1024);
  const std::size_t page = 4096;
  while (pool.size() < n) {
    void* p = mmap(nullptr, fiber_stack_bytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED || mprotect(p, page, PROT_NONE) != 0) {
      std::fprintf(stderr, "bgtq emulator: cannot map a fiber stack\n");
      std::abort();
    }
    unsigned char* const stack = static_cast<unsigned char*>(p) + page;
    fiber_slot& f = pool.emplace_back();
    const tsan_blind blind(true);  // the stack's first frame is the emulator's
#if defined(BGTQ_EMU_FIBER_ASM)
    f.sp = fiber_stack_init(stack + fiber_stack_bytes);
#else
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = stack;
    f.ctx.uc_stack.ss_size = fiber_stack_bytes;
    f.ctx.uc_link = nullptr;  // fiber_entry never returns
    makecontext(&f.ctx, fiber_entry, 0);
#endif
#if defined(BGTQ_EMU_TSAN)
    f.tsan = __tsan_create_fiber(0);
#endif
  }
  return pool;
}
//! Runs body(arg, t) for t < nt as fibers on this thread (those of `parity`),
//! round-robin from barrier to barrier, until all have returned; aborts on a deadlock (a
//! full round without a barrier arrival or an ended thread).
inline void run_fibers(unsigned parity, unsigned nt, void (*body)(const void*, unsigned), const void* arg) {
  if (fiber_sched != nullptr || nt > 1024) {
    std::fprintf(stderr, "bgtq emulator: a launch of %u threads from inside a kernel or of more than 1024\n", nt);
    std::abort();
  }
  fiber_run r;
  r.body = body;
  r.body_arg = arg;
  r.fibers.resize(nt);
  std::vector<fiber_slot>& slots = fiber_slots(parity, nt);
  for (unsigned t = 0; t < nt; ++t) r.fibers[t].slot = &slots[t];
  fiber_sched = &r;
#if defined(BGTQ_EMU_TSAN)
  r.tsan_scheduler = __tsan_get_current_fiber();
#endif
  tsan_release(&r.start);  // everything above, and the launch's setup before the call
  unsigned alive = nt;
  {
    const tsan_blind blind(true);  // the scheduler's loop is bookkeeping (its switches too)
    while (alive > 0) {
      const std::uint64_t before = r.events;
      for (unsigned t = 0; t < nt; ++t) {
        fiber& f = r.fibers[t];
        if (f.done) continue;
        r.running = t;
        f.exchange();
#if defined(BGTQ_EMU_FIBER_ASM)
        void* const to = f.slot->sp;
        tsan_switch(f.slot->tsan);
        fiber_switch(&r.scheduler, to);
#else
        tsan_switch(f.slot->tsan);
        swapcontext(&r.scheduler, &f.slot->ctx);
#endif
        f.exchange();
        if (f.done) --alive;
      }
      if (alive > 0 && r.events == before) {
        std::fprintf(stderr,
                     "bgtq emulator: deadlock: %u of %u threads of a launch wait at barriers that the others will not "
                     "reach (a __syncthreads or warp collective not every thread calls)\n",
                     alive, nt);
        std::abort();
      }
    }
  }
  fiber_sched = nullptr;
}
#else
inline void fiber_arrive() {}
inline void fiber_yield() {}
#endif
//! Fibers for this launch (see above): the default but under AddressSanitizer;
//! BGTQ_EMU_THREADS=os selects OS threads.
inline bool use_fibers() {
#if defined(BGTQ_EMU_FIBERS)
  static const bool fibers = [] {
    const char* e = std::getenv("BGTQ_EMU_THREADS");
    if (e == nullptr || *e == 0 || std::strcmp(e, "fibers") == 0) return true;
    if (std::strcmp(e, "os") == 0) return false;
    std::fprintf(stderr, "bgtq emulator: BGTQ_EMU_THREADS=%s is not fibers or os\n", e);
    std::abort();
  }();
  return fibers;
#else
  return false;
#endif
}

// Stream order under ThreadSanitizer. The host joins a launch's threads without
// synchronising (AnnotateIgnoreSync): the launch's writes stay unordered against the host
// and against later launches until something orders them: the next API call that
// touches device memory or a plain launch (host_sync acquires every launch's `done`), or,
// in a launch overlapped with its predecessor (programmatic dependent launch), the
// kernel's grid_dependency_wait (acquires the predecessor's `done`; earlier launches the
// host acquires before creating the threads). So a kernel that reads, before its
// grid_dependency_wait, what its predecessor writes (or writes what it reads) gets a
// race report: on a device that part may run while the predecessor still runs.
// Without ThreadSanitizer these are no-ops: launches are synchronous.
inline std::vector<launch_state*> unsynced;  // launches whose `done` the host has not acquired
inline void host_sync() {
  for (launch_state* l : unsynced) tsan_acquire(&l->done);
  unsynced.clear();
}
inline void dependency_wait() {
  if (current->wait_for != nullptr) tsan_acquire(current->wait_for);
}

//! The order of a launch's CTAs. A device runs them in no fixed order, so a kernel
//! whose result depends on it is wrong (one CTA reading what another writes in the same
//! launch; a write past a CTA's own rows that the neighbour's later write hides). The
//! emulator runs them one after another, in grid order (x fastest) on each kernel's
//! even-numbered launches and in reverse on its odd-numbered ones (counted per kernel),
//! so a check that runs the same launches twice (the decode checks' two runs, compared
//! bit for bit) sees both orders of every kernel. The shared-memory poison alternates
//! with it (0xFF, 0x55). BGTQ_EMU_CTA_ORDER=forward or reverse fixes the order (to
//! bisect a failure); the poison still alternates.
enum class cta_order { alternate, forward, reverse };
inline cta_order configured_cta_order() {
  const char* e = std::getenv("BGTQ_EMU_CTA_ORDER");
  if (e == nullptr || *e == 0 || std::strcmp(e, "alternate") == 0) return cta_order::alternate;
  if (std::strcmp(e, "forward") == 0) return cta_order::forward;
  if (std::strcmp(e, "reverse") == 0) return cta_order::reverse;
  std::fprintf(stderr, "bgtq emulator: BGTQ_EMU_CTA_ORDER=%s is not alternate, forward or reverse\n", e);
  std::abort();
}

//! Runs kernel(args...) on grid x block threads, CTA after CTA (in the order above);
//! `overlapped`: the kernel may start before its predecessor ends (BGTQ_LAUNCH_OVERLAP).
//! The launch has ended when this returns; under TSan its writes are ordered as
//! described above.
template <class... P, class... A>
void stream_launch(bool overlapped, void (*kernel)(P...), dim3 grid, dim3 block, std::size_t smem, A&&... a) {
  launch_state* pred = nullptr;
  if (overlapped && !unsynced.empty()) {
    pred = unsynced.back();
    unsynced.pop_back();
  }
  host_sync();  // everything before the predecessor (all of it when not overlapped)
  if (pred != nullptr) unsynced.push_back(pred);
  if (smem > smem_limit(reinterpret_cast<const void*>(kernel))) {  // like the device: the launch fails
    fail(cudaErrorInvalidValue);
    return;
  }
  const cta_order order = configured_cta_order();
  bool odd = false;  // this kernel's odd-numbered launch
  {
    static std::mutex mu;
    static std::map<const void*, unsigned> per_kernel;
    std::lock_guard<std::mutex> lock(mu);
    odd = per_kernel[reinterpret_cast<const void*>(kernel)]++ % 2 == 1;
  }
  const bool reverse = order == cta_order::reverse || (order == cta_order::alternate && odd);
  const unsigned char poison = odd ? 0x55 : 0xFF;
  launch_state& s = slots[launches++ % 2];  // the predecessor's is the other one
  s.wait_for = pred != nullptr ? &pred->done : nullptr;
  const unsigned nt = block.x * block.y * block.z;
  const unsigned nw = (nt + 31) / 32;
  // everything the threads read lives in the slot (or their own copies), not on this
  // stack: under TSan the host's later calls reuse it unordered against their reads
  s.smem.assign(std::max<std::size_t>(smem, 16) + 64, poison);
  const bool fibers = use_fibers();
  s.block.reset(nt, fibers);
  s.warps.resize(nw);
  for (unsigned w = 0; w < nw; ++w) s.warps[w].reset(std::min(32u, nt - 32 * w), fibers);
  s.shfl.assign(static_cast<std::size_t>(nw) * 32, 0);
  s.mma.assign(static_cast<std::size_t>(nw) * 32 * 6, 0);
  for (auto& a : s.any) a.store(0);
  s.copies_left.store(false);
  using args_t = std::tuple<std::decay_t<P>...>;
  const auto args = std::make_shared<const args_t>(std::forward<A>(a)...);
  s.args = args;
  // one CTA thread's life: every CTA of the grid in turn, between two CTA barriers
  // (the per-thread variables are the emulator's: over fibers several threads write them,
  // so their writes are hidden from ThreadSanitizer)
  const auto body = [kernel, grid, block, reverse, poison, sp = &s, ap = args.get()](unsigned t) {
      launch_state& s = *sp;
      {
        const tsan_blind blind(true);
        current = sp;
        blockDim = block;
        gridDim = grid;
        threadIdx = dim3(t % block.x, (t / block.x) % block.y, t / (block.x * block.y));
      }
      const std::size_t ctas = static_cast<std::size_t>(grid.x) * grid.y * grid.z;
      for (std::size_t i = 0; i < ctas; ++i) {
        const std::size_t c = reverse ? ctas - 1 - i : i;
        {
          const tsan_blind blind(true);
          blockIdx = dim3(static_cast<unsigned>(c % grid.x), static_cast<unsigned>(c / grid.x % grid.y),
                          static_cast<unsigned>(c / (static_cast<std::size_t>(grid.x) * grid.y)));
        }
        if (t == 0) {
          std::memset(s.smem.data(), poison, s.smem.size());
          poison_static_shared(poison);
        }
        s.block.arrive_and_wait();
        std::apply(kernel, *ap);
        cp_drain();
        s.block.arrive_and_wait();
      }
      tsan_release(&s.done);
  };
#if defined(BGTQ_EMU_FIBERS)
  if (fibers) {
    // each fiber runs its own copy of `body`: this stack frame is reused unordered
    // against the fibers' reads once the launch returns (as each OS thread has its own)
    run_fibers(
        static_cast<unsigned>(&s - slots), nt,
        [](const void* b, unsigned t) {
          const auto own = [b] {
            const tsan_blind blind(true);
            return *static_cast<const decltype(body)*>(b);
          }();
          own(t);
        },
        &body);
  } else
#endif
  {
    std::vector<std::thread> threads;
    threads.reserve(nt);
    for (unsigned t = 0; t < nt; ++t) threads.emplace_back([t, body] { body(t); });
    const tsan_blind blind(false);  // joining orders nothing (see above)
    for (auto& th : threads) th.join();
  }
  unsynced.push_back(&s);
  if (s.copies_left.load()) fail(cudaErrorLaunchFailure);
}
//! A plain launch whose results the caller may read at once (the tests' probe kernels).
template <class... P, class... A>
void launch(void (*kernel)(P...), dim3 grid, dim3 block, std::size_t smem, A&&... a) {
  stream_launch(false, kernel, grid, block, smem, std::forward<A>(a)...);
  host_sync();
}

//! The meeting point of a warp collective (shuffle, mma.sync): the lanes wait for each
//! other, as they must for the exchange, but on the device that orders no memory, so
//! ThreadSanitizer is told to ignore this barrier's synchronisation (and its internals):
//! only __syncwarp and __syncthreads order shared memory between threads in its eyes.
//! The exchange slots are relaxed atomics, so their own traffic is no race.
inline void warp_rendezvous(unsigned w) {
  const tsan_blind blind(true);
  state().warps[w].arrive_and_wait();
}
template <class T>
void slot_store(T& slot, T v) {
  std::atomic_ref<T>(slot).store(v, std::memory_order_relaxed);
}
template <class T>
T slot_load(T& slot) {
  return std::atomic_ref<T>(slot).load(std::memory_order_relaxed);
}

}  // namespace bgtq_emu

// ------------------------------------------------------------------ device functions
inline void __syncthreads() { bgtq_emu::state().block.arrive_and_wait(); }
//! Every thread of the CTA makes the same calls, so a thread's n-th call meets the
//! others' n-th: slot n % 3 collects it; after the barrier thread 0 clears the slot of
//! call n - 1 (read by everyone before they reached this barrier; written again only by
//! call n + 2, after the next barrier, which thread 0 reaches after clearing it).
inline int __syncthreads_or(int pred) {
  auto& s = bgtq_emu::state();
  unsigned n = 0;
  {
    const bgtq_emu::tsan_blind blind(true);  // the emulator's count (over fibers, shared storage)
    n = bgtq_emu::syncthreads_or_calls++ % 3;
  }
  if (pred != 0) s.any[n].fetch_or(1);
  s.block.arrive_and_wait();
  const int r = s.any[n].load();
  if (bgtq_emu::flat_tid() == 0) s.any[(n + 2) % 3].store(0);
  return r;
}
inline void __syncwarp(unsigned = 0xffffffffu) { bgtq_emu::state().warps[bgtq_emu::flat_tid() / 32].arrive_and_wait(); }

template <class T>
T __shfl_xor_sync(unsigned, T v, int lane_mask, int = 32) {
  static_assert(sizeof(T) <= 8, "shuffle of a type wider than 8 bytes");
  auto& s = bgtq_emu::state();
  const unsigned tid = bgtq_emu::flat_tid();
  const unsigned w = tid / 32, lane = tid % 32;
  std::uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bgtq_emu::slot_store(s.shfl[w * 32 + lane], bits);
  bgtq_emu::warp_rendezvous(w);
  const std::uint64_t got = bgtq_emu::slot_load(s.shfl[w * 32 + (lane ^ static_cast<unsigned>(lane_mask))]);
  bgtq_emu::warp_rendezvous(w);  // every lane has read before the slots are reused
  T r;
  std::memcpy(&r, &got, sizeof(T));
  return r;
}

namespace bgtq_emu {

//! fp16 bits -> float (exact), for the emulated tensor-core product.
inline double half_to_double(std::uint32_t h) {
  const std::uint32_t s = (h >> 15) & 1u, e = (h >> 10) & 31u, m = h & 1023u;
  double v = 0.0;
  if (e == 0) {
    v = std::ldexp(static_cast<double>(m), -24);
  } else if (e == 31) {
    v = m ? NAN : INFINITY;
  } else {
    v = std::ldexp(static_cast<double>(m | 1024u), static_cast<int>(e) - 25);
  }
  return s ? -v : v;
}

//! One warp's `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 d, a, b, d`, written
//! from the PTX ISA's fragment tables (independently of the kernels): lane = 4 gid + tq;
//! A[r][k] is in lane 4 (r % 8) + (k % 8) / 2, register (r / 8) + 2 (k / 8), half k % 2;
//! B[k][n] in lane 4 n + (k % 8) / 2, register k / 8, half k % 2; d[e] is
//! D[gid + 8 (e / 2)][2 tq + e % 2]. Products are exact; the 16-term sum is formed in
//! double and rounded once (the hardware's internal order and rounding are not
//! specified, so the tests compare with a tolerance). All 32 lanes must call it.
inline void mma_m16n8k16(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
  auto& s = state();
  const unsigned tid = flat_tid();
  const unsigned w = tid / 32, lane = tid % 32;
  std::uint32_t* slot = &s.mma[(static_cast<std::size_t>(w) * 32 + lane) * 6];
  for (int i = 0; i < 4; ++i) slot_store(slot[i], a[i]);
  slot_store(slot[4], b0);
  slot_store(slot[5], b1);
  warp_rendezvous(w);
  std::uint32_t* wslots = &s.mma[static_cast<std::size_t>(w) * 32 * 6];
  auto A = [&](int r, int k) {
    const std::uint32_t reg = slot_load(wslots[(4 * (r % 8) + (k % 8) / 2) * 6 + (r / 8) + 2 * (k / 8)]);
    return half_to_double(k % 2 ? reg >> 16 : reg & 0xFFFFu);
  };
  auto B = [&](int k, int n) {
    const std::uint32_t reg = slot_load(wslots[(4 * n + (k % 8) / 2) * 6 + 4 + k / 8]);
    return half_to_double(k % 2 ? reg >> 16 : reg & 0xFFFFu);
  };
  const int gid = static_cast<int>(lane / 4), tq = static_cast<int>(lane % 4);
  float out[4];
  for (int e = 0; e < 4; ++e) {
    const int r = gid + 8 * (e / 2), n = 2 * tq + e % 2;
    double sum = 0.0;
    for (int k = 0; k < 16; ++k) sum += A(r, k) * B(k, n);
    out[e] = static_cast<float>(static_cast<double>(d[e]) + sum);
  }
  warp_rendezvous(w);  // every lane has read the slots before they are reused
  for (int e = 0; e < 4; ++e) d[e] = out[e];
}

}  // namespace bgtq_emu

template <class T>
inline T __ldg(const T* p) {
  return *p;
}
inline unsigned atomicOr(unsigned* p, unsigned v) { return std::atomic_ref<unsigned>(*p).fetch_or(v); }
inline unsigned atomicAnd(unsigned* p, unsigned v) { return std::atomic_ref<unsigned>(*p).fetch_and(v); }
inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) {
  return std::atomic_ref<unsigned long long>(*p).fetch_add(v);
}
inline unsigned long long atomicMin(unsigned long long* p, unsigned long long v) {
  std::atomic_ref<unsigned long long> a(*p);
  unsigned long long old = a.load();
  while (v < old && !a.compare_exchange_weak(old, v)) {
  }
  return old;
}

// ------------------------------------------------------------------ runtime API
inline const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidDeviceFunction: return "invalid device function";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
  }
  return "unknown error";
}
inline const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidDeviceFunction: return "cudaErrorInvalidDeviceFunction";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
  }
  return "cudaErrorUnknown";
}
inline cudaError_t cudaGetLastError() {
  const int e = bgtq_emu::last_error;
  bgtq_emu::last_error = 0;
  return static_cast<cudaError_t>(e);
}
inline cudaError_t cudaPeekAtLastError() { return static_cast<cudaError_t>(bgtq_emu::last_error); }
inline cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}
inline cudaError_t cudaGetDevice(int* d) {
  *d = 0;
  return cudaSuccess;
}
inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int d) {
  if (d != 0) return bgtq_emu::fail(cudaErrorInvalidValue);
  std::memset(p, 0, sizeof *p);
  std::strcpy(p->name, "bgtq CPU emulator");
  p->totalGlobalMem = bgtq_emu::emulated_memory;
  p->multiProcessorCount = bgtq_emu::emulated_sms;
  p->major = 9;
  p->l2CacheSize = 1 << 20;
  return cudaSuccess;
}
inline cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int) {
  if (a == cudaDevAttrMultiProcessorCount) {
    *v = bgtq_emu::emulated_sms;
  } else if (a == cudaDevAttrComputeCapabilityMajor) {
    *v = 9;  // like an H100/H200: the tensor-core decode path is available
  } else if (a == cudaDevAttrMaxSharedMemoryPerBlockOptin) {
    // sm_90's 227 KB; BGTQ_EMU_SMEM_OPTIN=<bytes> emulates a smaller device (tests)
    const char* e = std::getenv("BGTQ_EMU_SMEM_OPTIN");
    *v = e != nullptr && *e != 0 ? std::atoi(e) : static_cast<int>(bgtq_emu::max_dynamic_smem);
  } else {
    return bgtq_emu::fail(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}
template <class F>
cudaError_t cudaFuncSetAttribute(F f, cudaFuncAttribute a, int v) {
  if (a != cudaFuncAttributeMaxDynamicSharedMemorySize || v < 0 || static_cast<std::size_t>(v) > bgtq_emu::max_dynamic_smem)
    return bgtq_emu::fail(cudaErrorInvalidValue);
  std::lock_guard<std::mutex> lock(bgtq_emu::limits_mu);
  bgtq_emu::smem_limits()[reinterpret_cast<const void*>(f)] = static_cast<std::size_t>(v);
  return cudaSuccess;
}
struct cudaFuncAttributes {
  std::size_t sharedSizeBytes = 0;  // static shared memory: not modelled
  int maxDynamicSharedSizeBytes = 0;
  int ptxVersion = 0;
};
template <class F>
cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* fa, F f) {
  *fa = cudaFuncAttributes{};
  fa->maxDynamicSharedSizeBytes = static_cast<int>(bgtq_emu::smem_limit(reinterpret_cast<const void*>(f)));
  return cudaSuccess;
}
//! CTAs of `block` threads and `smem` bytes one emulated SM holds: the register file is
//! not modelled, the shared memory is (at most 4, like a 128-thread CTA of ~128 registers).
template <class F>
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* n, F, int block, std::size_t smem) {
  if (block <= 0 || block > 1024) return bgtq_emu::fail(cudaErrorInvalidValue);
  if (const int e = bgtq_emu::occupancy_fault.error.load(); e != 0) return bgtq_emu::fail(static_cast<cudaError_t>(e));
  if (const int b = bgtq_emu::occupancy_fault.blocks.load(); b >= 0) {
    *n = b;
    return cudaSuccess;
  }
  const std::size_t per = std::max<std::size_t>(smem, 1);
  *n = static_cast<int>(std::min<std::size_t>(4, bgtq_emu::max_dynamic_smem / per));
  return cudaSuccess;
}
inline cudaError_t cudaMalloc(void** p, std::size_t n) {
  *p = n <= bgtq_emu::emulated_memory ? std::aligned_alloc(256, (std::max<std::size_t>(n, 1) + 255) / 256 * 256) : nullptr;
  return *p ? cudaSuccess : bgtq_emu::fail(cudaErrorMemoryAllocation);
}
template <class T>
cudaError_t cudaMalloc(T** p, std::size_t n) {
  return cudaMalloc(reinterpret_cast<void**>(p), n);
}
inline cudaError_t cudaFree(void* p) {
  bgtq_emu::host_sync();
  std::free(p);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void* d, const void* s, std::size_t n, cudaMemcpyKind) {
  bgtq_emu::host_sync();  // stream order: the launches before it have ended
  if (n) std::memmove(d, s, n);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void* d, const void* s, std::size_t n, cudaMemcpyKind k, cudaStream_t = nullptr) {
  return cudaMemcpy(d, s, n, k);
}
inline cudaError_t cudaMemset(void* d, int v, std::size_t n) {
  bgtq_emu::host_sync();
  if (n) std::memset(d, v, n);
  return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void* d, int v, std::size_t n, cudaStream_t = nullptr) { return cudaMemset(d, v, n); }
inline cudaError_t cudaStreamSynchronize(cudaStream_t) {
  bgtq_emu::host_sync();
  return cudaSuccess;
}
// events: host wall-clock stamps (the emulator runs launches synchronously)
struct CUevent_st {
  std::chrono::steady_clock::time_point t;
};
inline cudaError_t cudaEventCreate(cudaEvent_t* e) {
  *e = new CUevent_st{};
  return cudaSuccess;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;
  return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t = nullptr) {
  e->t = std::chrono::steady_clock::now();
  return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t) {
  bgtq_emu::host_sync();
  return cudaSuccess;
}
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b) {
  *ms = std::chrono::duration<float, std::milli>(b->t - a->t).count();
  return cudaSuccess;
}
inline cudaError_t cudaDeviceSynchronize() {
  bgtq_emu::host_sync();
  return cudaSuccess;
}
