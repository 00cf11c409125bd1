#include <catch2/catch.hpp>

#include <map>
#include <random>

#include "allocator/ledger.h"

using gshare::allocator::Allocation;
using gshare::allocator::AllocationKind;
using gshare::allocator::Ledger;

namespace {
Allocation device_allocation(uint64_t ptr, uint64_t bytes, int device = 0) {
  Allocation a;
  a.key = ptr;
  a.bytes = bytes;
  a.device = int16_t(device);
  a.kind = AllocationKind::kDevice;
  return a;
}
}  // namespace

TEST_CASE("a freed allocation gives back exactly what it took") {
  Ledger ledger;
  REQUIRE(ledger.insert(device_allocation(0x7000'0000'0000, 4096)));
  REQUIRE(ledger.insert(device_allocation(0x7000'0001'0000, 1 << 20)));
  CHECK(ledger.bytes_on_device(0) == 4096 + (1 << 20));
  Allocation out;
  REQUIRE(ledger.remove(AllocationKind::kDevice, 0x7000'0000'0000, &out));
  CHECK(out.bytes == 4096);
  CHECK(ledger.bytes_on_device(0) == 1 << 20);
  CHECK(ledger.size() == 1);
}

TEST_CASE("a pointer the ledger never saw is not found") {
  Ledger ledger;
  Allocation out;
  CHECK_FALSE(ledger.remove(AllocationKind::kDevice, 0x1234, &out));
  REQUIRE(ledger.insert(device_allocation(0x1000, 10)));
  CHECK_FALSE(ledger.remove(AllocationKind::kDevice, 0x1001, &out));
}

TEST_CASE("handles and pointers with equal values do not collide") {
  Ledger ledger;
  Allocation physical = device_allocation(0x5000, 2 << 20);
  physical.kind = AllocationKind::kPhysical;
  REQUIRE(ledger.insert(physical));
  REQUIRE(ledger.insert(device_allocation(0x5000, 100)));
  Allocation out;
  REQUIRE(ledger.find(AllocationKind::kPhysical, 0x5000, &out));
  CHECK(out.bytes == 2 << 20);
  REQUIRE(ledger.find(AllocationKind::kDevice, 0x5000, &out));
  CHECK(out.bytes == 100);
}

TEST_CASE("update changes an entry in place and keeps totals") {
  Ledger ledger;
  Allocation physical = device_allocation(0x9000, 1000, 2);
  physical.kind = AllocationKind::kPhysical;
  REQUIRE(ledger.insert(physical));
  CHECK(ledger.update(AllocationKind::kPhysical, 0x9000, [](Allocation& a) {
    a.map_count++;
    a.bytes = 1500;
  }));
  CHECK(ledger.bytes_on_device(2) == 1500);
  char why[200];
  CHECK(ledger.is_valid(why, sizeof why));
}

TEST_CASE("the ledger stays exact through growth and random churn") {
  Ledger ledger;
  std::map<uint64_t, uint64_t> model;
  std::mt19937_64 random(42);
  uint64_t total = 0;
  for (int step = 0; step < 200000; ++step) {
    bool add = model.size() < 5000 && (model.empty() || random() % 3 != 0);
    if (add) {
      uint64_t ptr = 0x7f00'0000'0000ull + (random() % (1u << 20)) * 256;
      uint64_t bytes = 1 + random() % 100000;
      if (model.count(ptr)) continue;
      REQUIRE(ledger.insert(device_allocation(ptr, bytes, int(ptr % 3))));
      model[ptr] = bytes;
      total += bytes;
    } else {
      auto it = model.begin();
      std::advance(it, random() % model.size());
      Allocation out;
      REQUIRE(ledger.remove(AllocationKind::kDevice, it->first, &out));
      REQUIRE(out.bytes == it->second);
      total -= it->second;
      model.erase(it);
    }
  }
  CHECK(ledger.size() == model.size());
  CHECK(ledger.bytes_on_device(0) + ledger.bytes_on_device(1) + ledger.bytes_on_device(2) == total);
  char why[200] = "";
  INFO(why);
  CHECK(ledger.is_valid(why, sizeof why));
}

TEST_CASE("drain_if removes exactly the matching entries") {
  Ledger ledger;
  for (uint64_t i = 0; i < 3000; ++i) {
    Allocation a = device_allocation(0x10000 + i * 512, 10, int(i % 2));
    a.context = i % 3;
    REQUIRE(ledger.insert(a));
  }
  uint64_t drained_bytes = 0;
  size_t drained = ledger.drain_if([](const Allocation& a) { return a.context == 1; },
                                   [&](const Allocation& a) { drained_bytes += a.bytes; });
  CHECK(drained == 1000);
  CHECK(drained_bytes == 10000);
  CHECK(ledger.size() == 2000);
  Allocation out;
  for (uint64_t i = 0; i < 3000; ++i)
    CHECK(ledger.find(AllocationKind::kDevice, 0x10000 + i * 512, &out) == (i % 3 != 1));
  char why[200] = "";
  CHECK(ledger.is_valid(why, sizeof why));
}
