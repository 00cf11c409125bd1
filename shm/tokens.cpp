#include "shm/tokens.h"

#include "shm/arbiter.h"

namespace gshare::shm {

void give_token_locked(Region& r, int k, int slot, uint64_t now, uint64_t slice_ns) {
  Token& token = r.header.tokens[k];
  token.holder = uint32_t(slot) + 1;
  token.holder_generation = r.slots[slot].generation;
  if (token.lender == uint32_t(slot) + 1) token.lender = 0;  // the lender has it back
  renew_slice_locked(token, now, slice_ns);
}

void note_loan_locked(Region& r, int k, int lender, uint64_t now) {
  Token& token = r.header.tokens[k];
  token.lender = uint32_t(lender) + 1;
  token.lender_generation = r.slots[lender].generation;
  token.lent_mono_ns = now;
  token.lender_slice_start_mono_ns = token.slice_start_mono_ns;
  token.lender_slice_end_mono_ns = token.slice_end_mono_ns;
  r.header.loans++;
}

void resume_lender_slice_locked(Token& token, uint64_t now) {
  const uint64_t lent_for = now > token.lent_mono_ns ? now - token.lent_mono_ns : 0;
  token.slice_start_mono_ns = token.lender_slice_start_mono_ns + lent_for;
  token.slice_end_mono_ns =
      token.lender_slice_end_mono_ns == UINT64_MAX ? UINT64_MAX : token.lender_slice_end_mono_ns + lent_for;
}

int lender_of_locked(const Region& r, int k) {
  const Token& token = r.header.tokens[k];
  if (token.lender == 0 || token.lender > kMaxSlots) return -1;
  const Slot& s = r.slots[token.lender - 1];
  if (s.state != kSlotLive || s.generation != token.lender_generation) return -1;
  return int(token.lender - 1);
}

void renew_slice_locked(Token& token, uint64_t now, uint64_t slice_ns) {
  token.slice_start_mono_ns = now;
  token.slice_end_mono_ns = slice_ns == UINT64_MAX ? UINT64_MAX : now + slice_ns;
}

void take_token_locked(Region& r, int k, int slot, JobState after, uint64_t now) {
  Slot& s = r.slots[slot];
  s.gate.store(kGateClosed, std::memory_order_release);
  s.job_state = after;
  if (after == kJobWaiting) s.wait_since_mono_ns = now;
  r.header.tokens[k].holder = 0;
  r.header.tokens[k].lender = 0;
  wake_waiters(r.header);
}

void forget_gone_holder_locked(Token& token) {
  token.holder = 0;
  token.lender = 0;
  token.slice_end_mono_ns = 0;
}

bool holds_any_token(const RegionHeader& h, uint32_t index) {
  for (const Token& token : h.tokens)
    if (token.holder == index + 1) return true;
  return false;
}

}  // namespace gshare::shm
