// The pinned host memory a page-out would add against GSHARE_HOST_MEM_LIMIT
// (shm/host_room.h), over a region written by hand in ordinary memory.
#include "shm/host_room.h"

#include <catch2/catch.hpp>

#include <memory>

namespace {

using namespace gshare::shm;

constexpr uint64_t kGiB = 1ull << 30;

// A region whose slots 0..2 are live: the others are free (zeroed).
std::unique_ptr<Region> three_jobs() {
  auto r = std::make_unique<Region>();
  for (int i = 0; i < 3; ++i) r->slots[i].state = kSlotLive;
  return r;
}

}  // namespace

TEST_CASE("host room: a page-out needs what its job's kept copies do not cover", "[host_room]") {
  auto r = three_jobs();
  Slot& out = r->slots[0];  // paged out: its copy held
  out.residency = kPagedOut;
  out.host_paging_bytes = 40 * kGiB;
  Slot& keeper = r->slots[1];  // resident, its copy kept
  keeper.residency = kResident;
  keeper.movable_bytes = 40 * kGiB;
  keeper.host_paging_bytes = 40 * kGiB;
  Slot& fresh = r->slots[2];  // resident, never paged out
  fresh.residency = kResident;
  fresh.movable_bytes = 40 * kGiB;
  const HostRoom room = host_room(*r, 100 * kGiB);
  CHECK(room.held == 80 * kGiB);
  CHECK(room.kept == 40 * kGiB);
  CHECK(HostRoom::need_of(keeper) == 0);
  CHECK(HostRoom::need_of(fresh) == 40 * kGiB);
  // The keeper pages out on its copy; the fresh job needs 40 GiB more than
  // the 20 left, unless the keeper frees its copy for it.
  CHECK(room.fits(keeper, 0, /*freeing_kept=*/false));
  CHECK_FALSE(room.fits(fresh, 0, /*freeing_kept=*/false));
  CHECK(room.fits(fresh, 0));
  CHECK_FALSE(room.fits(fresh, 30 * kGiB));
  // A free slot's figures count for nothing.
  r->slots[5].host_paging_bytes = 500 * kGiB;
  CHECK(host_room(*r, 100 * kGiB).held == 80 * kGiB);
}

TEST_CASE("host room: figures near the top of the range never wrap", "[host_room]") {
  auto r = three_jobs();
  Slot& keeper = r->slots[0];
  keeper.residency = kResident;
  keeper.movable_bytes = 8 * kGiB;
  keeper.host_paging_bytes = 8 * kGiB;
  Slot& fresh = r->slots[1];
  fresh.residency = kResident;
  fresh.movable_bytes = 8 * kGiB;
  // No limit read (the host's memory unknown): every page-out fits.
  CHECK(host_room(*r, UINT64_MAX).fits(fresh, 0));
  // A slot another process left with a huge figure: the sum saturates, and
  // nothing more fits.
  r->slots[2].host_paging_bytes = UINT64_MAX - kGiB;
  const HostRoom room = host_room(*r, 100 * kGiB);
  CHECK(room.held == UINT64_MAX);
  CHECK_FALSE(room.fits(fresh, 0, /*freeing_kept=*/false));
}

TEST_CASE("host room: the limit's default is half of the host's memory", "[host_room]") {
  CHECK(host_limit_or_default(3 * kGiB) == 3 * kGiB);
  const uint64_t half = host_limit_or_default(0);
  CHECK(half > 0);
  CHECK(half < UINT64_MAX);
}

TEST_CASE("host room: a limit past what the host can pin is held to seven eighths of its memory",
          "[host_room]") {
  CHECK(host_limit_ceiling(128 * kGiB) == 112 * kGiB);
  const uint64_t host = 2 * host_limit_or_default(0);
  CHECK(host_limit_or_default(host * 2) == host_limit_ceiling(host));
  CHECK(host_limit_or_default(host_limit_ceiling(host)) == host_limit_ceiling(host));
  CHECK(host_limit_or_default(kGiB) == kGiB);
}
