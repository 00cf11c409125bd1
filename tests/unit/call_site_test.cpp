// allocator/call_site.h: what makes a site, that the cached walk finds the
// site a full unwind finds, and that no stack makes a walk fault.
#include <catch2/catch.hpp>

#include <alloca.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "allocator/call_site.h"

using gshare::allocator::call_site;
using gshare::allocator::CodeRange;
using gshare::allocator::site_walk_counts;
using gshare::allocator::SiteWalk;

namespace {

const CodeRange kNoSkip{};

// Keeps a call from being a tail call, which would take its caller's frame
// out of the stack.
inline uint32_t kept(uint32_t site) {
  asm volatile("" ::: "memory");
  return site;
}

// Two places that take a site.
[[gnu::noinline]] uint32_t from_a(SiteWalk walk) { return kept(call_site(kNoSkip, walk)); }
[[gnu::noinline]] uint32_t from_b(SiteWalk walk) { return kept(call_site(kNoSkip, walk)); }

// `place`'s site under three frames of this function: the whole site is
// then made of fixed return addresses, whichever instruction of a test
// calls it (a compiler may copy a loop's body).
[[gnu::noinline]] uint32_t nested_site(uint32_t (*place)(SiteWalk), int depth = 3) {
  return kept(depth == 0 ? place(SiteWalk::kCached) : nested_site(place, depth - 1));
}

// The cached walk's site and a full unwind's, from the same call
// instruction (a loop that cannot be unrolled).
struct BothWalks {
  uint32_t cached;
  uint32_t unwound;
};
volatile int g_two_walks = 2;
[[gnu::noinline]] BothWalks both_walks() {
  uint32_t sites[2];
  for (int i = 0; i < g_two_walks; ++i) sites[i] = from_a(i == 0 ? SiteWalk::kCached : SiteWalk::kUnwound);
  return {sites[0], sites[1]};
}

// Enough calls for the cached walk to know every step of this place.
constexpr int kWarmUp = 3;

[[gnu::noinline]] BothWalks both_walks_at_depth(int depth) {
  BothWalks sites = depth == 0 ? both_walks() : both_walks_at_depth(depth - 1);
  asm volatile("" ::: "memory");
  return sites;
}

// Like gshare's hooks: code whose frames a site skips, in a section of its
// own (the linker provides its bounds).
#define SKIPPED_CODE [[gnu::noinline, gnu::section("site_test_skipped")]]
extern "C" const char __start_site_test_skipped[], __stop_site_test_skipped[];
CodeRange skipped_code() {
  return {uintptr_t(__start_site_test_skipped), uintptr_t(__stop_site_test_skipped)};
}
SKIPPED_CODE uint32_t hook_one(const CodeRange& skip) { return kept(call_site(skip)); }
SKIPPED_CODE uint32_t hook_two(const CodeRange& skip) { return kept(call_site(skip)); }
// `hook`'s site under four frames of this function, as nested_site.
[[gnu::noinline]] uint32_t calls_hook(uint32_t (*hook)(const CodeRange&), const CodeRange& skip,
                                      int depth = 4) {
  return kept(depth == 1 ? hook(skip) : calls_hook(hook, skip, depth - 1));
}

// both_walks with its own frames skipped, so that the site is made of its
// callers': the odd frames a test puts there are stepped through.
SKIPPED_CODE uint32_t skipped_site(SiteWalk walk) { return kept(call_site(skipped_code(), walk)); }
SKIPPED_CODE BothWalks both_walks_of_callers() {
  uint32_t sites[2];
  for (int i = 0; i < g_two_walks; ++i)
    sites[i] = skipped_site(i == 0 ? SiteWalk::kCached : SiteWalk::kUnwound);
  return {sites[0], sites[1]};
}

// Runs `body` on a thread of its own (so that its stack lookups are not the
// test thread's).
template <class Body>
void on_new_thread(Body&& body) {
  std::thread thread(body);
  thread.join();
}

}  // namespace

TEST_CASE("calls from one place share a site; calls from two places have two") {
  std::vector<uint32_t> a, b;
  const int rounds = 8;
  for (int i = 0; i < rounds; ++i) {
    a.push_back(nested_site(from_a));
    b.push_back(nested_site(from_b));
  }
  REQUIRE(a[0] != 0);
  REQUIRE(b[0] != 0);
  CHECK(a[0] != b[0]);
  for (int i = 1; i < rounds; ++i) {
    CHECK(a[i] == a[0]);
    CHECK(b[i] == b[0]);
  }
}

TEST_CASE("frames of skipped code, like gshare's hooks, are not part of a site") {
  std::vector<uint32_t> skipping, not_skipping;
  for (auto hook : {hook_one, hook_two}) {
    skipping.push_back(calls_hook(hook, skipped_code()));
    not_skipping.push_back(calls_hook(hook, kNoSkip));
  }
  CHECK(skipping[0] != 0);
  CHECK(skipping[0] == skipping[1]);
  CHECK(not_skipping[0] != not_skipping[1]);
}

namespace {
// Of 10 sites taken from one place after warming up, how many the cached
// walk found.
uint64_t cached_walks_of_a_place() {
  for (int i = 0; i < kWarmUp; ++i) nested_site(from_a);
  uint64_t before = site_walk_counts().cached;
  for (int i = 0; i < 10; ++i) nested_site(from_a);
  return site_walk_counts().cached - before;
}
}  // namespace

TEST_CASE("once a place's frames are known, its site comes from the cached walk") {
  SECTION("on the main thread") { CHECK(cached_walks_of_a_place() == 10); }
  SECTION("on a thread of glibc's") {
    uint64_t cached = 0;
    on_new_thread([&] { cached = cached_walks_of_a_place(); });
    CHECK(cached == 10);
  }
}

TEST_CASE("the cached walk finds the site a full unwind finds, at any depth") {
  for (int depth = 0; depth < 24; ++depth) {
    for (int i = 0; i < kWarmUp; ++i) both_walks_at_depth(depth);
    uint64_t cached_before = site_walk_counts().cached;
    BothWalks sites = both_walks_at_depth(depth);
    INFO("depth " << depth);
    CHECK(sites.cached != 0);
    CHECK(sites.cached == sites.unwound);
    CHECK(site_walk_counts().cached == cached_before + 1);
  }
}

namespace {
// A frame whose size varies from call to call: its step cannot be cached.
[[gnu::noinline]] BothWalks both_walks_below_alloca(size_t bytes) {
  char* buffer = static_cast<char*>(alloca(bytes));
  memset(buffer, 0, bytes);
  asm volatile("" : : "r"(buffer) : "memory");
  return both_walks();
}
}  // namespace

TEST_CASE("a frame whose size varies gives the right site, never a fault") {
  for (size_t bytes : {64, 64, 64, 64, 4096, 64, 100000, 64, 4096, 64, 64, 64})
    for (int i = 0; i < 2; ++i) {
      BothWalks sites = both_walks_below_alloca(bytes);
      INFO(bytes << " bytes");
      CHECK(sites.cached == sites.unwound);
    }
}

namespace {
std::atomic<int> g_handler_calls{0};
BothWalks g_handler_sites[8];

void take_sites_in_handler(int) {
  int n = g_handler_calls.fetch_add(1);
  if (n < 8) g_handler_sites[n] = both_walks_of_callers();
}

void raise_with_handler(bool alternate_stack) {
  std::vector<char> stack(256 * 1024);
  stack_t alternate{}, old_alternate{};
  if (alternate_stack) {
    alternate.ss_sp = stack.data();
    alternate.ss_size = stack.size();
    REQUIRE(sigaltstack(&alternate, &old_alternate) == 0);
  }
  struct sigaction action{}, old_action{};
  action.sa_handler = take_sites_in_handler;
  action.sa_flags = alternate_stack ? SA_ONSTACK : 0;
  sigemptyset(&action.sa_mask);
  REQUIRE(sigaction(SIGUSR1, &action, &old_action) == 0);
  g_handler_calls = 0;
  for (int i = 0; i < 8; ++i) raise(SIGUSR1);
  sigaction(SIGUSR1, &old_action, nullptr);
  if (alternate_stack) sigaltstack(&old_alternate, nullptr);
}
}  // namespace

TEST_CASE("a site taken in a signal handler is the same by either walk") {
  for (bool alternate_stack : {false, true}) {
    on_new_thread([&] { raise_with_handler(alternate_stack); });
    INFO((alternate_stack ? "on an alternate signal stack" : "on the thread's stack"));
    REQUIRE(g_handler_calls == 8);
    for (const BothWalks& sites : g_handler_sites) {
      CHECK(sites.cached != 0);
      CHECK(sites.cached == sites.unwound);
    }
  }
}

namespace {
ucontext_t g_test_context, g_fiber_context;
BothWalks g_fiber_sites[8];

void fiber_body() {
  for (BothWalks& sites : g_fiber_sites) sites = both_walks_of_callers();
  // Returning resumes g_test_context (uc_link).
}
}  // namespace

TEST_CASE("a site taken on a fiber's stack is the same by either walk") {
  on_new_thread([] {
    std::vector<char> stack(256 * 1024);
    REQUIRE(getcontext(&g_fiber_context) == 0);
    g_fiber_context.uc_stack.ss_sp = stack.data();
    g_fiber_context.uc_stack.ss_size = stack.size();
    g_fiber_context.uc_link = &g_test_context;
    makecontext(&g_fiber_context, fiber_body, 0);
    REQUIRE(swapcontext(&g_test_context, &g_fiber_context) == 0);
  });
  for (const BothWalks& sites : g_fiber_sites) {
    CHECK(sites.cached != 0);
    CHECK(sites.cached == sites.unwound);
  }
}

TEST_CASE("a site taken on a stack the program supplied is the same by either walk") {
  constexpr size_t kStackBytes = 1 << 20;
  void* stack = aligned_alloc(4096, kStackBytes);
  REQUIRE(stack);
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  pthread_attr_setstack(&attributes, stack, kStackBytes);
  static BothWalks sites[4];
  pthread_t thread;
  REQUIRE(pthread_create(&thread, &attributes, [](void*) -> void* {
            for (BothWalks& s : sites) s = both_walks_of_callers();
            return nullptr;
          }, nullptr) == 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attributes);
  free(stack);
  for (const BothWalks& s : sites) {
    CHECK(s.cached != 0);
    CHECK(s.cached == s.unwound);
  }
}

#if defined(__x86_64__)
TEST_CASE("a walk stops at code without unwind tables, the cached walk too") {
  // JIT-like code with no unwind tables: sub $8,%rsp; call *%rdi; add $8,%rsp; ret
  static const unsigned char kCode[] = {0x48, 0x83, 0xec, 0x08, 0xff, 0xd7,
                                        0x48, 0x83, 0xc4, 0x08, 0xc3};
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(page != MAP_FAILED);
  memcpy(page, kCode, sizeof kCode);
  REQUIRE(mprotect(page, 4096, PROT_READ | PROT_EXEC) == 0);
  auto jit = reinterpret_cast<BothWalks (*)(BothWalks (*)())>(page);
  // BothWalks comes back in a register, which the trampoline passes through.
  // The site is from_a's, both_walks's and the trampoline's return
  // addresses: the walk must stop at the trampoline.
  std::vector<BothWalks> sites;
  for (int i = 0; i < 6; ++i) sites.push_back(jit(both_walks));
  uint64_t cached_before = site_walk_counts().cached;
  sites.push_back(jit(both_walks));
  CHECK(site_walk_counts().cached == cached_before + 1);
  for (const BothWalks& s : sites) {
    CHECK(s.cached != 0);
    CHECK(s.cached == s.unwound);
    CHECK(s.cached == sites[0].cached);
  }
  munmap(page, 4096);
}
#endif

TEST_CASE("threads taking sites at once find the same sites by either walk") {
  std::atomic<int> wrong{0}, cached{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        BothWalks sites = both_walks();
        if (sites.cached == 0 || sites.cached != sites.unwound) wrong++;
      }
      cached += int(site_walk_counts().cached);
    });
  for (std::thread& t : threads) t.join();
  CHECK(wrong == 0);
  CHECK(cached > 8 * 1900);
}
