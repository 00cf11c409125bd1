// The launch tokens' fields (shm/layout.h, Token) are written only here.
// Whoever decides who holds a token (scheduler/token.cpp, or the arbiter
// when a slot goes or the lanes move) calls these under the region's lock;
// readers elsewhere only read (docs/DESIGN.md, §7.1).
#pragma once

#include <cstdint>

#include "shm/layout.h"

namespace gshare::shm {

// Token `k` goes to `slot` (the caller has updated the slot's own state):
// a slice starts now and lasts `slice_ns` (UINT64_MAX: for ever). A loan
// stands until the lender has the token again, whoever holds it meanwhile.
void give_token_locked(Region& r, int k, int slot, uint64_t now, uint64_t slice_ns);

// Token `k`, about to go to a borrower, is on loan from `lender` from
// `now`; the lender's slice, as it stands, is kept (scheduler/token.h).
void note_loan_locked(Region& r, int k, int lender, uint64_t now);

// Token `k`, just given back to its lender, has the lender's slice again,
// moved on by the loan's length: a turn counts only the time its job held
// the token (scheduler/token.cpp).
void resume_lender_slice_locked(Token& token, uint64_t now);

// The slot that lent token `k` and may take it back, or -1: no loan, or its
// lender's slot was freed or reused since.
int lender_of_locked(const Region& r, int k);

// The holder of token `k` keeps it: a new slice starts now.
void renew_slice_locked(Token& token, uint64_t now, uint64_t slice_ns);

// Token `k` is taken from its holder `slot`: its gate closes, its job state
// becomes `after` (waiting since `now` if kJobWaiting), the token is free
// and its waiters are woken.
void take_token_locked(Region& r, int k, int slot, JobState after, uint64_t now);

// Token `k`'s holder is gone (its slot freed or reused): the token is free.
// Whoever waits decides again.
void forget_gone_holder_locked(Token& token);

// Whether slot `index` holds any of the GPU's tokens.
bool holds_any_token(const RegionHeader& h, uint32_t index);

}  // namespace gshare::shm
