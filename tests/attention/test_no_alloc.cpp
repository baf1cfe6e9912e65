// The decode path allocates nothing (docs/integration.md §2): after add_sequence and the
// workspaces exist, append and both decode_attention overloads make no heap allocation,
// for every cache family, with and without the fp16 window, across page boundaries.
// This program replaces the global operator new/delete with counting versions (they
// count only while a test enables them; everything else goes to malloc/free as usual),
// which can also fail one chosen allocation, so that add_sequence's out-of-memory path
// is tested too.
#include <bgtq/attention/decode.hpp>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "cache_fixtures.hpp"
#include "common.hpp"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_allocations{0};
std::atomic<long> g_fail_at{-1};  // while counting: the allocation with this index throws

void* counted(std::size_t n, std::size_t align) {
  if (g_counting.load(std::memory_order_relaxed)) {
    const long i = g_allocations.fetch_add(1, std::memory_order_relaxed);
    if (i == g_fail_at.load(std::memory_order_relaxed)) throw std::bad_alloc();
  }
  if (n == 0) n = 1;
  void* p = align > alignof(std::max_align_t) ? std::aligned_alloc(align, (n + align - 1) / align * align) : std::malloc(n);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(std::size_t n) { return counted(n, 0); }
void* operator new[](std::size_t n) { return counted(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) { return counted(n, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted(n, static_cast<std::size_t>(a)); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted(n, 0);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted(n, 0);
  } catch (...) {
    return nullptr;
  }
}
// not inlined: in the one-file test program (BGTQ_UNITY_BUILD) GCC 12 inlined the free()
// into other files' vector destructors and warned of a new/free mismatch (-Wmismatched-new-delete)
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace {

template <class Make>
void check_no_alloc(int sink, int recent) {
  const int L = 2, H = 2, Hq = 4, D = 16, B = 3;
  auto cache = Make::build(bgtq_test::small_config(L, H, Hq, D, /*max_pages=*/64, sink, recent), 7);
  std::vector<int> seqs;
  for (int b = 0; b < B; ++b) seqs.push_back(cache.add_sequence());
  std::vector<float> k(static_cast<std::size_t>(H) * D), v(k.size()), q(static_cast<std::size_t>(B) * Hq * D),
      out(q.size());
  bgtq_test::fill_normal(q, 11);
  bgtq::attention_workspace ws(cache);
  bgtq::thread_pool pool(2);
  std::vector<bgtq::attention_workspace> wss{bgtq::attention_workspace(cache), bgtq::attention_workspace(cache)};
  auto step = [&](int t) {
    for (int b = 0; b < B; ++b)
      for (int l = 0; l < L; ++l) {
        bgtq_test::fill_normal(k, 1000u + static_cast<std::uint64_t>(t * 16 + b * 4 + l));
        bgtq_test::fill_normal(v, 5000u + static_cast<std::uint64_t>(t * 16 + b * 4 + l));
        cache.append(seqs[static_cast<std::size_t>(b)], l, k.data(), v.data(), 1);
      }
    for (int l = 0; l < L; ++l) {
      bgtq::decode_attention(cache, l, std::span<const int>(seqs), q.data(), out.data(), ws);
      bgtq::decode_attention(cache, l, std::span<const int>(seqs), q.data(), out.data(), pool,
                             std::span<bgtq::attention_workspace>(wss));
    }
  };
  step(0);  // warm-up (first use of the pool's threads)
  g_allocations = 0;
  g_counting = true;
  for (int t = 1; t < 300; ++t) step(t);  // > 4 pages of 64 tokens per sequence
  g_counting = false;
  INFO(Make::name << " sink " << sink << " recent " << recent << ": " << cache.pages_used() << " pages in use");
  CHECK(cache.pages_used() >= B * 4);
  CHECK(g_allocations.load() == 0);
}

}  // namespace

TEST_CASE("append and decode_attention allocate nothing after add_sequence and the workspaces", "[attention][alloc]") {
  // the counter itself counts (else the test could not fail)
  g_allocations = 0;
  g_counting = true;
  { std::vector<int> probe(10); (void)probe; }
  g_counting = false;
  REQUIRE(g_allocations.load() == 1);
  for (int w : {0, 1}) {
    const int sink = w ? 2 : 0, recent = w ? 8 : 0;
    check_no_alloc<bgtq_test::make_bgtq>(sink, recent);
    check_no_alloc<bgtq_test::make_fp16>(sink, recent);
    check_no_alloc<bgtq_test::make_kivi>(sink, recent);
  }
}

TEST_CASE("add_sequence: any failed allocation is capacity_exhausted and leaves the cache as it was", "[attention][alloc]") {
  // each of add_sequence's allocations fails in turn (a fresh slot and a freed one):
  // a bgtq::error, never std::bad_alloc; no sequence, page or byte appears; the live
  // sequence keeps its tokens; the next add_sequence succeeds with the same id
  auto cache = bgtq_test::make_bgtq::build(bgtq_test::small_config(1, 2, 4, 16, 8, 2, 3), 3);
  const int live = cache.add_sequence();
  const int freed = cache.add_sequence();
  std::vector<float> k(static_cast<std::size_t>(70) * 2 * 16), v(k.size()), before(16), after(16);
  bgtq_test::fill_normal(k, 1);
  bgtq_test::fill_normal(v, 2);
  cache.append(live, 0, k.data(), v.data(), 70);
  cache.decode_key(live, 0, 1, 40, before.data());
  for (const bool reuse : {false, true}) {
    if (reuse) cache.free_sequence(freed);  // the next id is the freed slot's
    const int want_id = reuse ? freed : freed + 1;
    const auto pages = cache.pages_free();
    const auto reserved = cache.bytes_reserved();
    int failures = 0;
    for (long at = 0;; ++at) {
      INFO((reuse ? "reused slot" : "new slot") << ", allocation " << at << " fails");
      REQUIRE(at < 64);
      int id = -1;
      bool threw = false;
      g_allocations = 0;
      g_fail_at = at;
      g_counting = true;
      try {
        id = cache.add_sequence();
      } catch (const bgtq::error& e) {
        threw = true;
        g_counting = false;
        CHECK(e.code() == bgtq::errc::capacity_exhausted);
      } catch (...) {
        g_counting = false;
        FAIL("an exception other than bgtq::error escaped add_sequence");
      }
      g_counting = false;
      g_fail_at = -1;
      if (!threw) {  // past its last allocation: it succeeded, with the id it would have had
        CHECK(id == want_id);
        cache.free_sequence(id);
        break;
      }
      ++failures;
      REQUIRE(cache.pages_free() == pages);
      REQUIRE(cache.bytes_reserved() == reserved);
      REQUIRE_THROWS_AS(cache.length(want_id, 0), bgtq::error);  // no half-made sequence
      REQUIRE(cache.length(live, 0) == 70);
    }
    CHECK(failures >= 7);  // the page table, lengths, positions and four window buffers
  }
  cache.decode_key(live, 0, 1, 40, after.data());
  REQUIRE(before == after);
  REQUIRE(cache.add_sequence() == freed);
}

TEST_CASE("kv_cache construction: any failed allocation is capacity_exhausted, never std::bad_alloc", "[attention][alloc]") {
  // each of the constructor's allocations fails in turn (its per-head tables, the pool,
  // the free list of 4 bytes per page, the encode scratch): a bgtq::error with
  // capacity_exhausted; only the pool's was one before (the free list of a pool of
  // zero-byte pages, 2.4 GB at 600M pages, escaped as std::bad_alloc)
  const bgtq::cache_config c = bgtq_test::small_config(2, 2, 4, 16, 8, 2, 3);
  const auto p = bgtq_test::random_plan(c.layers, c.kv_heads, c.q_heads, c.head_dim, bgtq::rope_pairing::half, 1, 6, 3, 5);
  const auto keys = bgtq::plan_key_states(p);
  const auto values = bgtq::plan_value_states(p);
  const auto fkeys = bgtq::fp16_states(c.layers, c.kv_heads, c.head_dim);
  for (const bool fp16 : {false, true}) {
    int failures = 0;
    for (long at = 0;; ++at) {
      INFO((fp16 ? "fp16" : "bgtq") << " cache, allocation " << at << " fails");
      REQUIRE(at < 64);
      auto k = keys;  // copies made before counting: the constructor takes them by move
      auto v = values;
      auto fk = fkeys;
      auto fv = fkeys;
      bool threw = false;
      g_allocations = 0;
      g_fail_at = at;
      g_counting = true;
      try {
        if (fp16)
          bgtq::fp16_cache<> cache(c, std::move(fk), std::move(fv));
        else
          bgtq::bgtq_cache<> cache(c, std::move(k), std::move(v));
      } catch (const bgtq::error& e) {
        threw = true;
        g_counting = false;
        CHECK(e.code() == bgtq::errc::capacity_exhausted);
        CHECK(std::string(e.what()).find("kv_cache: cannot allocate") != std::string::npos);
      } catch (...) {
        g_counting = false;
        FAIL("an exception other than bgtq::error escaped the kv_cache constructor");
      }
      g_counting = false;
      g_fail_at = -1;
      if (!threw) break;  // past its last allocation: built
      ++failures;
    }
    CHECK(failures >= 6);  // three head tables, the pool, the free list, the scratch and zero row
  }
}
