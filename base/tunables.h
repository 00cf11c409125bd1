// gshare's tuning constants, in one place: each with why it has its value.
// The code that uses one names it with `using tunables::kName;` beside its
// rule. docs/DESIGN.md, §12, lists them with their units; the GSHARE_*
// variables (base/options.h) are the settings a user may change.
#pragma once

#include <cstdint>

namespace gshare::tunables {

// --- Admission waits (allocator/admission.cpp) ---
inline constexpr uint64_t kPollNs = 50'000'000;          // re-check at least this often
inline constexpr uint64_t kAskAgainNs = 1'000'000'000;   // repeat release requests while short

// --- Paging to host memory (allocator/pager.cpp, allocator/page_requests.cpp) ---
// How long a page-out waits for the device calls already inside the driver
// (enqueues, and synchronous copies waiting for the job's own work).
inline constexpr uint64_t kDrainWaitNs = 2'000'000'000;
// The pager thread's longest sleep between looks at its requests.
inline constexpr uint64_t kPagerPollNs = 100'000'000;
// How often a job still short of room asks again: a job asked may have
// declined (it took a token meanwhile) or not held enough.
inline constexpr uint64_t kAskPageOutAgainNs = 100'000'000;
// How long a job waiting for room keeps its token with no page-out under
// way for it, before it hands the token on.
inline constexpr uint64_t kPageInHoldNs = 1'000'000'000;
// How long a prefetch defers to jobs waiting in an allocation (the room a
// page-out made for them is theirs) before it goes on all the same: a job
// that waits for what no page-out can free must not keep a paged-out job
// from coming back.
inline constexpr uint64_t kPrefetchDeferNs = 2'000'000'000;
// How long a page-out waits for the job to give its framework's cache
// back first (asked with the page-out): freed blocks need no copy.
inline constexpr uint64_t kCacheFirstNs = 1'000'000'000;
// After a job was asked to free the host copies it keeps (another job's
// page-out needed the host memory), it makes none ahead for this long.
inline constexpr uint64_t kHostCopyPauseNs = 10'000'000'000;
// Threads that fault a host copy in (one per GiB at most): a page-out's
// in a hurry (the next job waits), a copy made ahead with fewer (the job
// computes meanwhile). gshare-sim pins ahead at their ratio of the rate.
inline constexpr int kPageOutTouchers = 8;
inline constexpr int kPrepareTouchers = 2;
// The page-in rate the prefetch policy assumes before any page-in on the
// GPU has been measured: pinned host-to-device copies over PCIe 4 x16.
inline constexpr uint64_t kAssumedPageInBytesPerS = 20'000'000'000;

// --- Classification into P and E (allocator/classifier.cpp) ---
// Below this no allocation site is taken: small buffers hardly move P or
// E, and they are classified by age alone (a site costs tens of
// nanoseconds once its frames are cached, a few microseconds until then).
inline constexpr uint64_t kSiteMinBytes = 2ull << 20;
// The bytes freed since the last boundary that make it a release point: a
// loop that reads values back mid-iteration frees small temporaries at each
// such sync, and those do not end its iteration.
inline constexpr uint64_t kReleaseBytes = 32ull << 20;
// A process that frees (that much) nothing, and does not grow, for this
// many boundaries keeps what it has: each boundary is then a release point.
inline constexpr uint64_t kQuietBoundaries = 8;
// Boundaries at which to try the measuring emptying of a framework cache:
// the first ones may come before the cache exists (a model's set-up), or
// where no Python is running.
inline constexpr int kMeasureTries = 20;
// P from a framework's figures is the least in use over this many answers,
// of the last kInUseIterations iterations.
inline constexpr int kInUseWindow = 64;
inline constexpr uint64_t kInUseIterations = 8;
// Answers running that agree within kReleaseBytes let P rise (a loop that
// syncs only at rest).
inline constexpr int kSteadyAnswers = 3;
// P moves only by more than this (or 1%): each move may re-form lanes.
inline constexpr uint64_t kPersistentStepBytes = 16ull << 20;
// E is the largest corrected peak of the last kPeakHistory iterations.
inline constexpr int kPeakHistory = 8;

// --- Asking frameworks for their figures (allocator/framework_counts.cpp) ---
// The share of time the questions may take, as 1/kDutyDivisor.
inline constexpr uint64_t kDutyDivisor = 100;
// The longest wait between questions; also while no framework answers.
inline constexpr uint64_t kQuietIntervalNs = 100'000'000;
// How much unused asking time may be saved up for a burst of questions.
inline constexpr uint64_t kBurstNs = 100'000'000;
// Once kInUseWindow answers have classified it, a job is asked at most
// this often while it is alone on its GPUs, or while its answers repeat
// themselves (kSteadyAnswersBeforeRare running agree: an inference
// server's weights): each question lands on the program's critical path
// (an inference request's latency), and such answers teach nothing. A
// second job, or an answer that differs, brings the rate above back.
inline constexpr uint64_t kRareQuestionIntervalNs = 1'000'000'000;
inline constexpr int kSteadyAnswersBeforeRare = 16;
// ... and at most once in this many host syncs, so that a question lands
// on at most 0.2% of a server's requests whatever their rate (once a
// second is 1% of them at 100 a second: its p99). Never rarer than
// kRareQuestionMaxIntervalNs, so that figures shown stay fresh.
inline constexpr uint64_t kRareQuestionSyncs = 500;
inline constexpr uint64_t kRareQuestionMaxIntervalNs = 30'000'000'000;

// --- Iteration detection (scheduler/iterations.cpp) ---
// A step may sync once, or once per piece of a forward pass (up to
// kMaxSyncPeriod times); three periods of history are kept for the largest.
inline constexpr int kMaxSyncPeriod = 32;
// Memory at two iteration boundaries differs by at most this: a step's
// activations are gone at its end, while a sync mid-step, after pieces were
// allocated, holds more (in a first step, or in any step of a program that
// allocates without a cache). PyTorch's cache holds exactly as much at every
// step's end; 2 MiB lets a small-block segment come or go, while a model's
// set-up, allocating a layer's weights (a few MiB) between syncs, does not
// pass for steps.
inline constexpr uint64_t kBoundaryBytesSlack = 2ull << 20;
// A sync pattern is stale once this many iterations' launches pass without
// a sync (a set-up that synced, then a loop that never does): the launch
// pattern takes over.
inline constexpr uint64_t kStaleIterations = 4;
inline constexpr uint64_t kStaleMinLaunches = 256;
// A sync pattern that ends within this many iterations was a burst (a
// model's set-up), not a loop: its iterations are taken back.
inline constexpr uint64_t kProbation = 16;
// A launch-observation window holds at most kWindowSamples or lasts
// kMaxWindowNs; it is analysed at kFirstAnalysisNs, then each time its age
// doubles, by at most kMaxAnalysisStepNs: a step of 5 s shows two periods at
// 12 s.
inline constexpr uint32_t kWindowSamples = 1u << 16;
inline constexpr uint64_t kFirstAnalysisNs = 500'000'000;
inline constexpr uint64_t kMaxWindowNs = 16'000'000'000;
inline constexpr uint64_t kMaxAnalysisStepNs = 4'000'000'000;  // analysed at 8, 12, 16 s
inline constexpr uint64_t kSearchEveryNs = 1'000'000'000;   // while no pattern is known
inline constexpr uint64_t kRecheckEveryNs = 5'000'000'000;  // to refresh a known one
// A period may differ from exact repetition in one sample in 256 (an
// occasional different kernel).
inline constexpr uint32_t kMismatchesPer = 256;

// --- The launch token (scheduler/token.cpp) ---
inline constexpr uint64_t kMaxSleepNs = 250'000'000;  // a waiter re-checks at least this often
inline constexpr uint64_t kMidIterationIdleNs = 2'000'000'000;  // see HolderWatch::idle
// A job this long without a launch or a wait is at rest even mid-step: its
// framework's cache may be emptied on request (allocator/admission.h).
inline constexpr uint64_t kQuietRestNs = 1'000'000'000;
inline constexpr uint64_t kMinSleepNs = 200'000;  // a waiter's shortest sleep
// A holder whose GPU has nothing of it queued and that has neither launched
// nor synced for this long works on the host: its token is lent to a
// waiting job until it launches again (scheduler/token.h, loans). Longer
// than the host gaps between one step's launches; short beside a turn.
inline constexpr uint64_t kLendAfterNs = 2'000'000;
// Shared turns (scheduler/token.h): a job becomes host-bound once its
// threads waited for the GPU (host syncs, copies that wait for kernels)
// less than kHostBoundShare of the time it ran (not waiting for the token)
// in kHostBoundStreak judgements in a row, each over at least
// kHostBoundJudgeNs of running time and kHostBoundMinWaits waits, and stops
// being so above kHostBoundLeaveShare. Measured on an H200: host-bound
// PyTorch jobs (2 ms MLP steps) waited 1% to 3% in turns of their own;
// PyTorch training jobs of 3 ms steps that keep the GPU busy 9% to 62%
// (rules/host_bound.h).
inline constexpr double kHostBoundShare = 0.1;
inline constexpr uint32_t kHostBoundStreak = 3;
inline constexpr double kHostBoundLeaveShare = 0.5;
// In a window in which it shared a turn a job's waits are the others' too:
// host-bound jobs twelve to a turn waited 25% to 47% on an H200. Only past
// this share has such a job turned busy (rules/host_bound.h).
inline constexpr double kHostBoundLeaveShareShared = 0.9;
// Shared windows with waits past kHostBoundLeaveShare, less those under it,
// that end a verdict (rules/host_bound.h): on an H200 a 3 ms training job
// judged host-bound on a reading of its first steps waited 0.59 of its
// windows beside a busy job, and held the verdict to its end, with two
// thirds of the others' steps; ended after ten windows in a row, such a
// verdict held three seconds and more, the windows swinging. Host-bound
// jobs beside others waited 0.25 to 0.54, mostly under the limit; one that
// doubts this often is judged again in turns of its own (a second or two).
inline constexpr uint32_t kHostBoundDoubts = 10;
inline constexpr uint64_t kHostBoundJudgeNs = 20'000'000;
inline constexpr uint64_t kHostBoundMinWaits = 10;
// A window with fewer waits goes on up to this much running time; a job
// still short of them then is not host-bound (rules/host_bound.h).
inline constexpr uint64_t kHostBoundFewWaitsNs = 200'000'000;
// The GPU-time measure behind it (runtime/gpu_busy.h): a job's kernels'
// share of a stretch of its launches in its own turn, timed by events
// around each launch. Host-bound needs a share under kHostBoundBusy, read
// within its streak, and a share over kHostBoundLeaveBusy ends it. A
// stretch lasts
// kGpuBusyStretchNs and kGpuBusyMinPairs launches, or kGpuBusyPairs
// launches: several steps of a job whose steps are host time. One cut
// short by the job's turn counts with kGpuBusyMinPairs. One starts every
// kGpuBusyEveryNs. On an H200, NVML's per-process utilization could not
// serve: each of four jobs time-sliced natively read 99%, and each under
// gshare's exclusive turns about what the GPU as a whole was busy.
inline constexpr uint32_t kHostBoundBusy = 300;       // thousandths
inline constexpr uint32_t kHostBoundLeaveBusy = 600;  // thousandths
// Both measures far under their limits say it in one judgement, without
// the streak: waits under kHostBoundSureShare and a GPU share under
// kHostBoundSureBusy. On an H200, 64 host-bound PyTorch jobs read waits of
// 0.5% to 0.9% and GPU shares of 0.04 to 0.10 three seconds into their
// window, none yet host-bound; jobs that keep the GPU busy read 0.6 and
// more (rules/host_bound.h).
inline constexpr double kHostBoundSureShare = 0.05;
inline constexpr uint32_t kHostBoundSureBusy = 150;  // thousandths
inline constexpr uint64_t kGpuBusyStretchNs = 10'000'000;
inline constexpr uint32_t kGpuBusyPairs = 256;
inline constexpr uint32_t kGpuBusyMinPairs = 4;
inline constexpr uint64_t kGpuBusyEveryNs = 1'000'000'000;
// Busy jobs whose kernels leave the GPU gaps share turns two at a time
// under GSHARE_SHARED_TURNS=gaps (rules/leaves_gaps.h): a job not
// host-bound whose GPU share in its own turns reads under kGapsSureBusy
// once, or whose running mean of kGapsMinReadings or more readings (each
// new one half of it) falls under kGapsBusy, until the mean passes
// kGapsLeaveBusy. A reading under kGapsLeastBusy is the host-bound rule's
// to judge: no pair. A reading of kGapsClearBusy or more counts as a full
// GPU where the job waited for the GPU kGapsMostWait or more of its turns
// of its own (a running mean over windows of 20 ms or more). On an H200,
// PyTorch training jobs of 3 ms steps read 0.53 to 1.0 in their own turns
// and waited 0.04 to 0.35 of single windows (most under 0.3); four of them
// made 0.84 to 1.02 of their native aggregate in turns of one job and
// 0.99 to 1.01 two to a turn. Jobs of 8.5 ms steps that keep the GPU full
// read 0.73 to 1.0 and waited 0.34 to 0.79 of single windows (most over
// 0.45): paired (four of eight, before the limit on waits), they made 1.008 and 1.010 of
// native against 1.024 in turns of their own, the pairs a sixth more
// steps than the others. 64 small host-bound jobs read 0.4 at most. A job
// that shares as one of a pair is not measured (others' kernels would
// count as its own): kGapsRecheckNs after its verdict it is judged anew,
// in turns of its own until then.
inline constexpr uint32_t kGapsLeastBusy = 400;  // thousandths
inline constexpr uint32_t kGapsClearBusy = 500;  // thousandths
inline constexpr uint32_t kGapsSureBusy = 850;   // thousandths
inline constexpr uint32_t kGapsBusy = 930;       // thousandths
inline constexpr uint32_t kGapsLeaveBusy = 970;  // thousandths
inline constexpr uint32_t kGapsMostWait = 400;   // thousandths
inline constexpr uint32_t kGapsMinReadings = 2;
inline constexpr uint64_t kGapsRecheckNs = 60'000'000'000;
// A gap on the GPU this long between one timed launch's end and the next's
// begin means the stream had gone idle: the next pair's time less the
// host's between its two calls is its kernel's (runtime/gpu_busy.cpp).
// Above the timer's resolution (about half a microsecond).
inline constexpr uint64_t kGpuBusyIdleGapNs = 2'000;
// srtf's estimate of the GPU time a job still needs. A job that gave its
// iteration count but has not run long enough for its iteration time to be
// measured counts as shortest for its first kProbeNs of GPU time: it gets a
// slice soon, which measures it, and is then ranked by its real estimate
// (otherwise it would count as longest, and never run to be measured).
inline constexpr uint64_t kProbeNs = 500'000'000;
// A turn lasts at least this many times what a switch to its job costs
// (rules::Job::switch_cost_ns): jobs of one lane hand their ephemeral
// memory over at a switch, and a turn of one short iteration would spend
// most of the GPU's time on that. 40 keeps switching under 2.5%: less than
// what sharing gains over running the jobs one after another (a job's
// exit overlapping the next one's work, about 1 s a job), so the
// time-sliced policies do not lose to fifo where the jobs must take turns...
inline constexpr uint64_t kTurnPerSwitchCost = 40;
// ...but a turn grows to no more than this: beyond it the others wait too
// long for their share. A switch that frees and allocates again a large
// GPU's memory (78 GB on an H200: 300 ms) costs 3% of a turn this long.
inline constexpr uint64_t kMaxTurnNs = 10'000'000'000;
// The default quantum (GSHARE_QUANTUM_MS not set) shrinks among many jobs
// so that a round of turns lasts about this long, to kMinQuantumNs at the
// least (rules::quantum_among): up to 16 jobs keep 20 ms turns, 64 take
// 5 ms ones. On an H200, 64 jobs of 2 ms steps made 0.83 of the fastest's
// steps over 30 s with 20 ms turns and 0.90 with 5 ms (natively 0.88-0.90).
inline constexpr uint64_t kRoundNs = 320'000'000;
inline constexpr uint64_t kMinQuantumNs = 5'000'000;
// A job idle this long, or never served, comes back level with the least
// vtime of the active jobs (rules::activate), neither behind nor ahead: the
// turn of credit either way is for a job idle only between two of its
// iterations, and jobs that come back together from a common start (each
// after its own set-up) would otherwise start up to two turns apart, a
// third of their share over a window of six rounds.
inline constexpr uint64_t kLongIdleNs = 1'000'000'000;

// --- The upkeep thread (runtime/upkeep.cpp) ---
// Dead processes' slots are reclaimed every tick, so their bytes return
// within a second even when no one allocates; pools are re-measured every
// kTicksPerRefresh ticks.
inline constexpr long kTickNs = 250'000'000;
inline constexpr int kTicksPerRefresh = 4;
// NVML's process query is a call into the kernel driver that can take a
// millisecond and delay the process's own GPU work; once the context memory
// stops changing (lazy module loading settles), ask ever less often, up to
// every 8 s, and every second again after a change.
inline constexpr unsigned kMinTicksPerContextRefresh = 4;
inline constexpr unsigned kMaxTicksPerContextRefresh = 32;

// --- Lanes (shm/lane_space.cpp) ---
// What a job may hold in ephemeral memory and still count as between
// iterations (leftovers such as a value read back, a small cache): the
// larger of kLaneSlackMinBytes and the GPU's memory / kLaneSlackDivisor.
inline constexpr uint64_t kLaneSlackMinBytes = 64ull << 20;
inline constexpr uint64_t kLaneSlackDivisor = 64;
// How long a lane's holder that has launched keeps its lane's space after
// it lost the token (it may be mid-iteration with host work between its
// kernels): as long as the token's own mid-iteration idle time.
inline constexpr uint64_t kLaneSettleNs = 2'000'000'000;

// --- The region's lock (shm/robust_mutex.h) ---
// How long one lock may wait for the mutex before it is declared unusable.
inline constexpr uint64_t kLockTimeoutNs = 5'000'000'000ull;

// --- Priority's bound on in-flight work (runtime/launch_gate.cpp) ---
// Launches a lower-priority job may have queued: with 1, a higher job that
// wakes starts within about one of its kernels.
inline constexpr int kPriorityInFlightDepth = 1;

// --- CUDA IPC of movable memory (allocator/memory_export.h) ---
// How long an importer waits for the exporting process to answer, and the
// exporter for an importer to ask: each step of one short exchange.
inline constexpr int kIpcTimeoutMs = 2000;

// --- Logging (base/log.cpp) ---
// At most kBurst messages per second; the rest are counted and reported.
inline constexpr int kBurst = 20;

}  // namespace gshare::tunables
