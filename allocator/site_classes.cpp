#include "allocator/site_classes.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>

#include <atomic>

#include "allocator/call_site.h"

namespace gshare::allocator {

namespace {

constexpr uint32_t kSiteSlots = 4096;

struct SiteRecord {
  uint32_t site;  // 0: empty
  uint16_t persistent;  // allocations from it that turned out persistent
  uint16_t ephemeral;   // ... and ephemeral
};
SiteRecord g_sites[kSiteSlots];
pthread_mutex_t g_sites_mutex = PTHREAD_MUTEX_INITIALIZER;

// gshare's own code: frames inside it are hooks, not sites.
CodeRange g_own;
pthread_once_t g_own_once = PTHREAD_ONCE_INIT;

int find_own_range(dl_phdr_info* info, size_t, void* base) {
  if (info->dlpi_addr != reinterpret_cast<uintptr_t>(base)) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
    g_own.begin = info->dlpi_addr + ph.p_vaddr;
    g_own.end = g_own.begin + ph.p_memsz;
  }
  return 1;
}

void learn_own_range() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&learn_own_range), &info) && info.dli_fbase)
    dl_iterate_phdr(find_own_range, info.dli_fbase);
}

// The record of `site`, added if absent; null if the table is full.
SiteRecord* site_record_locked(uint32_t site) {
  for (uint32_t i = site % kSiteSlots, n = 0; n < kSiteSlots; ++n, i = (i + 1) % kSiteSlots) {
    if (g_sites[i].site == site) return &g_sites[i];
    if (g_sites[i].site == 0) {
      g_sites[i].site = site;
      return &g_sites[i];
    }
  }
  return nullptr;
}

std::atomic<bool> g_process_frees{false};

}  // namespace

uint32_t stack_site() {
  pthread_once(&g_own_once, learn_own_range);
  return call_site(g_own);
}

void count_site(uint32_t site, bool persistent) {
  if (site == 0) return;
  pthread_mutex_lock(&g_sites_mutex);
  if (SiteRecord* r = site_record_locked(site)) {
    uint16_t& n = persistent ? r->persistent : r->ephemeral;
    if (n < UINT16_MAX) ++n;
  }
  pthread_mutex_unlock(&g_sites_mutex);
}

bool site_is_persistent(uint32_t site) {
  if (site == 0 || !g_process_frees.load(std::memory_order_relaxed)) return false;
  pthread_mutex_lock(&g_sites_mutex);
  SiteRecord* r = site_record_locked(site);
  bool persistent = r && r->persistent > 0 && r->ephemeral == 0;
  pthread_mutex_unlock(&g_sites_mutex);
  return persistent;
}

void note_process_frees() {
  if (!g_process_frees.load(std::memory_order_relaxed)) g_process_frees.store(true, std::memory_order_relaxed);
}

void forget_sites_after_fork() {
  g_process_frees.store(false);
  g_sites_mutex = PTHREAD_MUTEX_INITIALIZER;
}

}  // namespace gshare::allocator
