// Streams, their worker threads, and events.
//
// Each stream is a FIFO of Work executed in order by one worker thread of its
// own, started on first use. A launch returns at once; at most kMaxPending
// items may be pending on a stream (like the real driver's bounded launch
// queue), past that the launching thread blocks until there is room.
// Synchronising a stream waits until its queue is empty and its worker idle.
#include <time.h>

#include <thread>

#include "fake_cuda_internal.h"

namespace fakecuda {

namespace {

constexpr size_t kMaxPending = 1024;

void worker_main(std::shared_ptr<CUstream_st> s) {
  std::unique_lock<std::mutex> lk(s->mu);
  for (;;) {
    s->cv.wait(lk, [&] { return !s->queue.empty() || s->destroyed; });
    if (s->queue.empty()) {  // destroyed and drained
      s->has_worker = false;
      return;
    }
    Work w = std::move(s->queue.front());
    s->queue.pop_front();
    s->running = true;
    lk.unlock();
    s->cv.notify_all();  // there is room in the queue again
    execute(w);
    w = Work();  // drop what the item held before saying it is done
    lk.lock();
    s->running = false;
    s->cv.notify_all();
  }
}

bool is_special(CUstream h) {
  return h == nullptr || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD;
}

// NULL means the legacy stream for the plain entry points and the per-thread
// stream for the _ptsz ones.
bool is_legacy(CUstream h, bool ptsz) {
  return h == CU_STREAM_LEGACY || (h == nullptr && !ptsz);
}

}  // namespace

std::shared_ptr<CUstream_st> default_stream_locked(CUctx_st* ctx) {
  if (!ctx->default_stream) {
    auto st = std::make_shared<CUstream_st>();
    st->ctx = ctx;
    st->is_default = true;
    st->id = S().next_id++;
    ctx->default_stream = st;
  }
  return ctx->default_stream;
}

CUresult stream_locked(CUstream h, std::shared_ptr<CUstream_st>* out) {
  if (is_special(h)) {
    CUctx_st* ctx = nullptr;
    CUresult rc = current_ctx_locked(&ctx);
    if (rc != CUDA_SUCCESS) return rc;
    *out = default_stream_locked(ctx);
    return CUDA_SUCCESS;
  }
  auto it = S().streams.find(h);
  if (it == S().streams.end()) return CUDA_ERROR_INVALID_HANDLE;
  *out = it->second;
  return CUDA_SUCCESS;
}

CUresult submit(const std::shared_ptr<CUstream_st>& s, Work w) {
  {
    std::lock_guard<std::mutex> g(S().mu);
    if (s->capture_graph) {
      if (s->capture_invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
      auto node = std::make_shared<CUgraphNode_st>();
      node->work = std::move(w);
      s->capture_graph->nodes.push_back(std::move(node));
      return CUDA_SUCCESS;
    }
  }
  std::unique_lock<std::mutex> lk(s->mu);
  // A kernel of no duration on an idle stream is over as it is launched,
  // as on a GPU: a sync after it finds nothing to wait for, rather than
  // the worker thread's wake-up (milliseconds on a loaded machine).
  if (w.kind == Work::kKernel && w.duration_ns == 0 && s->queue.empty() && !s->running) {
    lk.unlock();
    execute(w);
    return CUDA_SUCCESS;
  }
  s->cv.wait(lk, [&] { return s->queue.size() + (s->running ? 1 : 0) < kMaxPending; });
  if (!s->has_worker) {
    try {
      std::thread(worker_main, s).detach();
    } catch (...) {
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    s->has_worker = true;
  }
  s->queue.push_back(std::move(w));
  lk.unlock();
  s->cv.notify_all();
  return CUDA_SUCCESS;
}

void wait_idle(CUstream_st* s) {
  std::unique_lock<std::mutex> lk(s->mu);
  s->cv.wait(lk, [&] { return s->queue.empty() && !s->running; });
}

void sync_context(CUctx_st* ctx, bool blocking_only) {
  std::vector<std::shared_ptr<CUstream_st>> streams;
  {
    std::lock_guard<std::mutex> g(S().mu);
    if (ctx->default_stream) streams.push_back(ctx->default_stream);
    for (const auto& st : ctx->streams) {
      if (blocking_only && (st->flags & CU_STREAM_NON_BLOCKING) != 0) continue;
      streams.push_back(st);
    }
  }
  for (const auto& st : streams) wait_idle(st.get());
}

void execute(const Work& w) {
  if (w.kind == Work::kCall) {
    if (w.call) w.call();
    return;
  }
  // A kernel: occupy the "GPU" for its duration. Sleep through all but the
  // last 50 us of long ones; spin (yielding) through the rest for accuracy.
  const uint64_t start = now_ns();
  const uint64_t target = start + w.duration_ns;
  if (w.duration_ns > 200000) {
    const uint64_t wake = target - 50000;
    struct timespec ts;
    ts.tv_sec = static_cast<time_t>(wake / 1000000000ULL);
    ts.tv_nsec = static_cast<long>(wake % 1000000000ULL);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
    }
  }
  while (now_ns() < target) std::this_thread::yield();
  trace_kernel(start, now_ns(), w.name);
}

}  // namespace fakecuda

using namespace fakecuda;

namespace {

CUresult stream_create(CUstream* phStream, unsigned int flags, int priority) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (phStream == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if ((flags & ~static_cast<unsigned int>(CU_STREAM_NON_BLOCKING)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  CUctx_st* ctx = nullptr;
  rc = current_ctx_locked(&ctx);
  if (rc != CUDA_SUCCESS) return rc;
  auto st = std::make_shared<CUstream_st>();
  st->ctx = ctx;
  st->flags = flags;
  st->priority = priority < -5 ? -5 : (priority > 0 ? 0 : priority);
  st->id = s.next_id++;
  s.streams[st.get()] = st;
  ctx->streams.push_back(st);
  *phStream = st.get();
  return CUDA_SUCCESS;
}

CUresult stream_synchronize(CUstream h, bool ptsz) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  std::shared_ptr<CUstream_st> st;
  {
    std::lock_guard<std::mutex> g(S().mu);
    rc = stream_locked(h, &st);
    if (rc != CUDA_SUCCESS) return rc;
    if (st->capture_graph) {
      st->capture_invalidated = true;  // like the real driver
      return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
  }
  if (is_legacy(h, ptsz)) {
    sync_context(st->ctx, /*blocking_only=*/true);
  } else {
    wait_idle(st.get());
  }
  release_pool_memory(st->ctx->device);
  return CUDA_SUCCESS;
}

CUresult stream_query(CUstream h) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  std::shared_ptr<CUstream_st> st;
  {
    std::lock_guard<std::mutex> g(S().mu);
    rc = stream_locked(h, &st);
    if (rc != CUDA_SUCCESS) return rc;
    if (st->capture_graph) {
      st->capture_invalidated = true;
      return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
  }
  std::lock_guard<std::mutex> g(st->mu);
  return (st->queue.empty() && !st->running) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult stream_get_ctx(CUstream h, CUcontext* pctx) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(S().mu);
  std::shared_ptr<CUstream_st> st;
  rc = stream_locked(h, &st);
  if (rc != CUDA_SUCCESS) return rc;
  *pctx = st->ctx;
  return CUDA_SUCCESS;
}

CUresult stream_get_priority(CUstream h, int* priority) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (priority == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(S().mu);
  std::shared_ptr<CUstream_st> st;
  rc = stream_locked(h, &st);
  if (rc != CUDA_SUCCESS) return rc;
  *priority = st->priority;
  return CUDA_SUCCESS;
}

CUresult stream_get_flags(CUstream h, unsigned int* flags) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> g(S().mu);
  std::shared_ptr<CUstream_st> st;
  rc = stream_locked(h, &st);
  if (rc != CUDA_SUCCESS) return rc;
  *flags = st->flags;
  return CUDA_SUCCESS;
}

CUresult stream_add_callback(CUstream h, CUstreamCallback callback, void* userData,
                             unsigned int flags) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (callback == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<CUstream_st> st;
  {
    std::lock_guard<std::mutex> g(S().mu);
    rc = stream_locked(h, &st);
    if (rc != CUDA_SUCCESS) return rc;
  }
  Work w;
  w.kind = Work::kCall;
  w.call = [callback, h, userData] { callback(h, CUDA_SUCCESS, userData); };
  return submit(st, std::move(w));
}

CUresult stream_wait_event(CUstream h, CUevent hEvent, unsigned int Flags) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if ((Flags & ~static_cast<unsigned int>(CU_EVENT_WAIT_EXTERNAL)) != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::shared_ptr<CUstream_st> st;
  std::shared_ptr<CUevent_st> ev;
  {
    std::lock_guard<std::mutex> g(S().mu);
    rc = stream_locked(h, &st);
    if (rc != CUDA_SUCCESS) return rc;
    auto it = S().events.find(hEvent);
    if (it == S().events.end()) return CUDA_ERROR_INVALID_HANDLE;
    ev = it->second;
    if (ev->capture_graph) {
      // The event was recorded in a capture: this stream joins it (fork of
      // a multi-stream capture), like the real driver.
      if (!st->capture_graph) {
        st->capture_graph = ev->capture_graph;
        st->capture_id = ev->capture_id;
        st->capture_origin = false;
        st->capture_invalidated = false;
      }
      return CUDA_SUCCESS;
    }
    if (st->capture_graph) return CUDA_SUCCESS;  // ordering within a graph is linear
  }
  uint64_t seq = 0;
  {
    std::lock_guard<std::mutex> g(S().ev_mu);
    if (ev->done_seq >= ev->record_seq) return CUDA_SUCCESS;  // already complete
    seq = ev->record_seq;
  }
  Work w;
  w.kind = Work::kCall;
  w.call = [ev, seq] {
    std::unique_lock<std::mutex> lk(S().ev_mu);
    S().ev_cv.wait(lk, [&] { return ev->done_seq >= seq; });
  };
  return submit(st, std::move(w));
}

CUresult event_record(CUevent hEvent, CUstream h) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  std::shared_ptr<CUstream_st> st;
  std::shared_ptr<CUevent_st> ev;
  {
    std::lock_guard<std::mutex> g(S().mu);
    auto it = S().events.find(hEvent);
    if (it == S().events.end()) return CUDA_ERROR_INVALID_HANDLE;
    ev = it->second;
    rc = stream_locked(h, &st);
    if (rc != CUDA_SUCCESS) return rc;
    if (st->capture_graph) {
      ev->capture_graph = st->capture_graph;
      ev->capture_id = st->capture_id;
      return CUDA_SUCCESS;
    }
    ev->capture_graph.reset();
  }
  uint64_t seq = 0;
  {
    std::lock_guard<std::mutex> g(S().ev_mu);
    seq = ++ev->record_seq;
  }
  auto complete = [ev, seq] {
    {
      std::lock_guard<std::mutex> g(S().ev_mu);
      if (ev->done_seq < seq) {
        ev->done_seq = seq;
        ev->time_ns = now_ns();
      }
    }
    S().ev_cv.notify_all();
  };
  Work w;
  w.kind = Work::kCall;
  w.call = complete;
  rc = submit(st, std::move(w));
  if (rc != CUDA_SUCCESS) complete();  // never leave a record that cannot finish
  return rc;
}

}  // namespace

extern "C" {

// ===========================================================================
// Streams
// ===========================================================================
CUresult CUDAAPI cuStreamCreate(CUstream* phStream, unsigned int Flags) {
  return stream_create(phStream, Flags, 0);
}

CUresult CUDAAPI cuStreamCreateWithPriority(CUstream* phStream, unsigned int flags,
                                            int priority) {
  return stream_create(phStream, flags, priority);
}

CUresult CUDAAPI cuStreamDestroy_v2(CUstream hStream) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  auto it = s.streams.find(hStream);
  if (it == s.streams.end()) return CUDA_ERROR_INVALID_HANDLE;
  std::shared_ptr<CUstream_st> st = it->second;
  s.streams.erase(it);
  auto& v = st->ctx->streams;
  for (auto vit = v.begin(); vit != v.end(); ++vit) {
    if (vit->get() == st.get()) {
      v.erase(vit);
      break;
    }
  }
  {
    std::lock_guard<std::mutex> sg(st->mu);
    st->destroyed = true;  // the worker finishes the queue, then exits
  }
  st->cv.notify_all();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamDestroy(CUstream hStream) { return cuStreamDestroy_v2(hStream); }

CUresult CUDAAPI cuStreamSynchronize(CUstream hStream) {
  return stream_synchronize(hStream, false);
}
CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream) {
  return stream_synchronize(hStream, true);
}
CUresult CUDAAPI cuStreamQuery(CUstream hStream) { return stream_query(hStream); }
CUresult CUDAAPI cuStreamQuery_ptsz(CUstream hStream) { return stream_query(hStream); }

CUresult CUDAAPI cuStreamGetCtx(CUstream hStream, CUcontext* pctx) {
  return stream_get_ctx(hStream, pctx);
}
CUresult CUDAAPI cuStreamGetCtx_ptsz(CUstream hStream, CUcontext* pctx) {
  return stream_get_ctx(hStream, pctx);
}
CUresult CUDAAPI cuStreamGetCtx_v2(CUstream hStream, CUcontext* pCtx, CUgreenCtx* pGreenCtx) {
  if (pGreenCtx != nullptr) *pGreenCtx = nullptr;
  return stream_get_ctx(hStream, pCtx);
}
CUresult CUDAAPI cuStreamGetCtx_v2_ptsz(CUstream hStream, CUcontext* pCtx,
                                        CUgreenCtx* pGreenCtx) {
  return cuStreamGetCtx_v2(hStream, pCtx, pGreenCtx);
}
CUresult CUDAAPI cuStreamGetPriority(CUstream hStream, int* priority) {
  return stream_get_priority(hStream, priority);
}
CUresult CUDAAPI cuStreamGetPriority_ptsz(CUstream hStream, int* priority) {
  return stream_get_priority(hStream, priority);
}
CUresult CUDAAPI cuStreamGetFlags(CUstream hStream, unsigned int* flags) {
  return stream_get_flags(hStream, flags);
}
CUresult CUDAAPI cuStreamGetFlags_ptsz(CUstream hStream, unsigned int* flags) {
  return stream_get_flags(hStream, flags);
}
CUresult CUDAAPI cuStreamAddCallback(CUstream hStream, CUstreamCallback callback,
                                     void* userData, unsigned int flags) {
  return stream_add_callback(hStream, callback, userData, flags);
}
CUresult CUDAAPI cuStreamAddCallback_ptsz(CUstream hStream, CUstreamCallback callback,
                                          void* userData, unsigned int flags) {
  return stream_add_callback(hStream, callback, userData, flags);
}
CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags) {
  return stream_wait_event(hStream, hEvent, Flags);
}
CUresult CUDAAPI cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags) {
  return stream_wait_event(hStream, hEvent, Flags);
}

// ===========================================================================
// Events
// ===========================================================================
CUresult CUDAAPI cuEventCreate(CUevent* phEvent, unsigned int Flags) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (phEvent == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const unsigned int known = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
  if ((Flags & ~known) != 0) return CUDA_ERROR_INVALID_VALUE;
  if ((Flags & CU_EVENT_INTERPROCESS) != 0 && (Flags & CU_EVENT_DISABLE_TIMING) == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  State& s = S();
  std::lock_guard<std::mutex> g(s.mu);
  CUctx_st* ctx = nullptr;
  rc = current_ctx_locked(&ctx);
  if (rc != CUDA_SUCCESS) return rc;
  auto ev = std::make_shared<CUevent_st>();
  ev->ctx = ctx;
  ev->flags = Flags;
  s.events[ev.get()] = ev;
  *phEvent = ev.get();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream) {
  return event_record(hEvent, hStream);
}
CUresult CUDAAPI cuEventRecord_ptsz(CUevent hEvent, CUstream hStream) {
  return event_record(hEvent, hStream);
}
CUresult CUDAAPI cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags) {
  (void)flags;
  return event_record(hEvent, hStream);
}
CUresult CUDAAPI cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream,
                                             unsigned int flags) {
  (void)flags;
  return event_record(hEvent, hStream);
}

CUresult CUDAAPI cuEventQuery(CUevent hEvent) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  std::shared_ptr<CUevent_st> ev;
  {
    std::lock_guard<std::mutex> g(S().mu);
    auto it = S().events.find(hEvent);
    if (it == S().events.end()) return CUDA_ERROR_INVALID_HANDLE;
    ev = it->second;
  }
  std::lock_guard<std::mutex> g(S().ev_mu);
  return ev->done_seq >= ev->record_seq ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult CUDAAPI cuEventSynchronize(CUevent hEvent) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  std::shared_ptr<CUevent_st> ev;
  {
    std::lock_guard<std::mutex> g(S().mu);
    auto it = S().events.find(hEvent);
    if (it == S().events.end()) return CUDA_ERROR_INVALID_HANDLE;
    ev = it->second;
  }
  {
    std::unique_lock<std::mutex> lk(S().ev_mu);
    const uint64_t target = ev->record_seq;
    S().ev_cv.wait(lk, [&] { return ev->done_seq >= target; });
  }
  release_pool_memory(ev->ctx->device);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventElapsedTime_v2(float* pMilliseconds, CUevent hStart, CUevent hEnd) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  if (pMilliseconds == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<CUevent_st> a, b;
  {
    std::lock_guard<std::mutex> g(S().mu);
    auto ia = S().events.find(hStart);
    auto ib = S().events.find(hEnd);
    if (ia == S().events.end() || ib == S().events.end()) return CUDA_ERROR_INVALID_HANDLE;
    a = ia->second;
    b = ib->second;
  }
  if (((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) != 0) return CUDA_ERROR_INVALID_HANDLE;
  std::lock_guard<std::mutex> g(S().ev_mu);
  if (a->record_seq == 0 || b->record_seq == 0) return CUDA_ERROR_INVALID_HANDLE;
  if (a->done_seq < a->record_seq || b->done_seq < b->record_seq) return CUDA_ERROR_NOT_READY;
  const double ns = static_cast<double>(static_cast<int64_t>(b->time_ns - a->time_ns));
  *pMilliseconds = static_cast<float>(ns / 1e6);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventElapsedTime(float* pMilliseconds, CUevent hStart, CUevent hEnd) {
  return cuEventElapsedTime_v2(pMilliseconds, hStart, hEnd);
}

CUresult CUDAAPI cuEventDestroy_v2(CUevent hEvent) {
  CUresult rc = check_init();
  if (rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> g(S().mu);
  if (S().events.erase(hEvent) == 0) return CUDA_ERROR_INVALID_HANDLE;
  return CUDA_SUCCESS;  // pending records/waits hold their own reference
}

CUresult CUDAAPI cuEventDestroy(CUevent hEvent) { return cuEventDestroy_v2(hEvent); }

}  // extern "C"

CUresult fakecuda::synchronize_stream(CUstream h, bool ptsz) { return stream_synchronize(h, ptsz); }
