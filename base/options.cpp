#include "base/options.h"

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/group_text.h"

namespace gshare {

namespace {

constexpr const char* kSizeForms =
    "a byte count (1073741824), a size with a unit (512MiB, 10GiB, 10G, 1.5T; "
    "K/M/G/T and KiB/MiB/GiB/TiB are powers of 1024, KB/MB/GB/TB of 1000), "
    "or a percentage of the GPU (25%)";
constexpr const char* kBoolForms = "1, 0, true, false, yes, no, on or off";
constexpr const char* kLogForms = "quiet, error, warn, info or debug";
constexpr const char* kGroupForms =
    "a group name of fewer than 256 characters, or a numeric gid from 0 to 4294967294 "
    "(plain decimal), without spaces or control characters";
// How much of a bad value a message quotes.
constexpr size_t kShownValueChars = 121;

using Parser = bool (*)(const char* value, Options* out);

bool parse_disable(const char* v, Options* o) { return parse_bool(v, &o->disable); }
bool parse_mem_limit(const char* v, Options* o) { return parse_size(v, &o->mem_limit); }

bool copy_text(const char* v, char* out) {
  size_t n = strlen(v);
  if (n == 0 || n >= kOptionTextChars) return false;
  memcpy(out, v, n + 1);
  return true;
}
bool parse_dir(const char* v, Options* o) { return v[0] == '/' && copy_text(v, o->dir); }

// Numbers are plain decimal: digits, with one '.' and more digits where a
// fraction means something, and a leading '-' only where negatives do. No
// whitespace, '+', hex, exponent, inf or nan: strtod and strtoll accept all
// of those ("0x14", " 20", "\n10", "0X1p4"), and a value that reads as
// something other than what it looks like must be refused, not guessed.
constexpr size_t kNumberChars = 24;

bool is_plain_decimal(const char* v, bool fraction, bool negative) {
  const char* p = v;
  if (negative && *p == '-') ++p;
  const char* digits = p;
  while (*p >= '0' && *p <= '9') ++p;
  if (p == digits) return false;
  if (fraction && *p == '.') {
    const char* decimals = ++p;
    while (*p >= '0' && *p <= '9') ++p;
    if (p == decimals) return false;
  }
  return *p == '\0' && size_t(p - v) <= kNumberChars;
}

// A decimal number in [low, high]; the whole text must be the number.
bool parse_number(const char* v, double low, double high, double* out) {
  if (!is_plain_decimal(v, true, low < 0)) return false;
  double x = strtod(v, nullptr);
  if (!(x >= low && x <= high)) return false;
  *out = x;
  return true;
}

bool parse_integer(const char* v, long long low, long long high, long long* out) {
  if (!is_plain_decimal(v, false, low < 0)) return false;
  errno = 0;
  long long x = strtoll(v, nullptr, 10);
  if (errno != 0 || x < low || x > high) return false;
  *out = x;
  return true;
}

// A group name, or a numeric gid in plain decimal. No spaces, control
// characters or ':', and a number must be a gid (parse_group_text):
// -1 or 4294967296 would otherwise name another group (or none) than the
// user meant, and the regions' group is their trust.
bool parse_group(const char* v, Options* o) {
  for (const char* p = v; *p; ++p) {
    unsigned char c = static_cast<unsigned char>(*p);
    if (c <= ' ' || c == 0x7F || c == ':') return false;
  }
  gid_t gid;
  if (parse_group_text(v, &gid) == GroupText::kInvalid) return false;
  return copy_text(v, o->group);
}

bool parse_policy_option(const char* v, Options* o) {
  if (!parse_policy(v, &o->policy)) return false;
  o->policy_given = true;
  return true;
}

bool parse_quantum(const char* v, Options* o) {
  o->quantum_given = parse_number(v, 0.1, 60000, &o->quantum_ms);
  return o->quantum_given;
}
bool parse_idle(const char* v, Options* o) { return parse_number(v, 0.1, 3600000, &o->idle_ms); }
bool parse_slice_max(const char* v, Options* o) { return parse_number(v, 0, 600000, &o->slice_max_ms); }
bool parse_admit_timeout(const char* v, Options* o) {
  return parse_number(v, 0, 1e7, &o->admit_timeout_s);
}
bool parse_expected_seconds(const char* v, Options* o) {
  return parse_number(v, 0.001, 1e9, &o->expected_seconds);
}

bool parse_weight(const char* v, Options* o) {
  long long x;
  if (!parse_integer(v, 1, 1000, &x)) return false;
  o->weight = uint32_t(x);
  return true;
}

bool parse_priority(const char* v, Options* o) {
  long long x;
  if (!parse_integer(v, -1000, 1000, &x)) return false;
  o->priority = int32_t(x);
  return true;
}

bool parse_expected_iters(const char* v, Options* o) {
  long long x;
  if (!parse_integer(v, 1, 1'000'000'000'000LL, &x)) return false;
  o->expected_iters = uint64_t(x);
  return true;
}

bool parse_paging(const char* v, Options* o) { return parse_bool(v, &o->paging); }
bool parse_prefetch(const char* v, Options* o) { return parse_bool(v, &o->prefetch); }
bool parse_host_mem_limit(const char* v, Options* o) {
  SizeSpec size;
  if (!parse_size(v, &size) || size.kind != SizeSpec::kBytes || size.bytes == 0) return false;
  o->host_mem_limit_bytes = size.bytes;
  return true;
}

bool parse_shared_turns(const char* v, Options* o) {
  if (strcasecmp(v, "pairs") == 0) return o->shared_turns = SharedTurns::kPairs, true;
  if (strcasecmp(v, "gaps") == 0) return o->shared_turns = SharedTurns::kGaps, true;
  bool on = false;
  if (!parse_bool(v, &on)) return false;
  o->shared_turns = on ? SharedTurns::kHostBound : SharedTurns::kOff;
  return true;
}

bool parse_handover(const char* v, Options* o) {
  if (strcasecmp(v, "strict") == 0) return o->strict_handover = true, true;
  if (strcasecmp(v, "overlap") == 0) return o->strict_handover = false, true;
  return false;
}

bool parse_log(const char* v, Options* o) {
  static const struct { const char* name; LogLevel level; } kLevels[] = {
      {"quiet", LogLevel::kQuiet}, {"error", LogLevel::kError}, {"warn", LogLevel::kWarn},
      {"info", LogLevel::kInfo},   {"debug", LogLevel::kDebug}};
  for (const auto& l : kLevels) {
    if (strcasecmp(v, l.name) == 0) {
      o->log_level = l.level;
      return true;
    }
  }
  return false;
}

struct OptionRow {
  OptionInfo info;
  const char* accepted;
  Parser parse;
};

// The one table of gshare's variables.
const OptionRow kOptions[] = {
    {{"GSHARE_DISABLE", "bool", "0",
      "1 makes every hook pass straight through to the driver: no accounting, no limits"},
     kBoolForms, parse_disable},
    {{"GSHARE_MEM_LIMIT", "size", "the whole GPU",
      "this process's device-memory quota on each GPU it uses"},
     kSizeForms, parse_mem_limit},
    {{"GSHARE_DIR", "path", "/dev/shm",
      "directory of the per-GPU arbiter regions; share it between containers"},
     "an absolute path", parse_dir},
    {{"GSHARE_GROUP", "group", "none (mode 0600)",
      "group that may join this user's regions (mode 0660); a name or a numeric gid"},
     kGroupForms, parse_group},
    {{"GSHARE_LOG", "level", "warn", "how much gshare writes to stderr"}, kLogForms, parse_log},
    {{"GSHARE_POLICY", "policy", "fair (prefetch with GSHARE_PAGING=on)",
      "who launches on a shared GPU: fifo, fair, srtf, priority, pack (lanes run at once, "
      "turns within a lane) or prefetch (turns ordered so that page-ins hide behind compute); "
      "the first process on the GPU sets it for all"},
     "fifo, fair, srtf, priority, pack or prefetch", parse_policy_option},
    {{"GSHARE_QUANTUM_MS", "ms", "20",
      "length of a time slice under fair (times the weight), srtf and priority"},
     "a number of milliseconds from 0.1 to 60000", parse_quantum},
    {{"GSHARE_WEIGHT", "integer", "1", "fair: this job's share of GPU time relative to others"},
     "an integer from 1 to 1000", parse_weight},
    {{"GSHARE_PRIORITY", "integer", "0",
      "priority: a job runs only while every job of higher priority is idle"},
     "an integer from -1000 to 1000", parse_priority},
    {{"GSHARE_EXPECTED_SECONDS", "seconds", "not given",
      "srtf: how much GPU time this job needs in all"},
     "a positive number of seconds", parse_expected_seconds},
    {{"GSHARE_EXPECTED_ITERS", "integer", "not given",
      "srtf: how many iterations this job runs; times the measured iteration time"},
     "a positive integer", parse_expected_iters},
    {{"GSHARE_IDLE_MS", "ms", "100",
      "a token holder that launches nothing for this long (and waits on no GPU work) gives "
      "the GPU up"},
     "a number of milliseconds from 0.1 to 3600000", parse_idle},
    {{"GSHARE_HANDOVER", "mode", "overlap",
      "overlap: the next job starts while this one's queued work finishes; strict: this "
      "job's work drains first"},
     "overlap or strict", parse_handover},
    {{"GSHARE_SLICE_MAX_MS", "ms", "200",
      "how far a slice may run past its quantum while waiting for an iteration boundary"},
     "a number of milliseconds from 0 to 600000", parse_slice_max},
    {{"GSHARE_SHARED_TURNS", "mode", "gaps",
      "gaps, under fair: jobs of equal weights whose host work leaves the GPU mostly idle between "
      "their syncs run beside one another in one turn, as they would natively, and busy jobs "
      "whose kernels still leave the GPU gaps (steps of a few ms) two to a turn; on: host-bound "
      "jobs only; pairs: any busy job two to a turn; off: every turn is one job's"},
     "1, 0, true, false, yes, no, on, off, gaps or pairs", parse_shared_turns},
    {{"GSHARE_ADMIT_TIMEOUT_S", "seconds", "600",
      "how long an allocation waits (for its turn, the safety condition, its lane's space or "
      "memory held by others) before it gets CUDA_ERROR_OUT_OF_MEMORY with what still failed; "
      "0: memory waits answer at once, the turn still waits up to 600 s"},
     "a number of seconds from 0 to 10000000", parse_admit_timeout},
    {{"GSHARE_PAGING", "bool", "off",
      "on: this job's device memory may be copied to host memory while it is switched out, "
      "so that jobs whose memory together exceeds the GPU still share it"},
     kBoolForms, parse_paging},
    {{"GSHARE_HOST_MEM_LIMIT", "size", "half of the host's memory",
      "how much host memory the jobs paged out of one GPU may hold together"},
     "a byte count or a size with a unit (64GiB), not a percentage", parse_host_mem_limit},
    {{"GSHARE_PREFETCH", "bool", "on",
      "with GSHARE_PAGING=on: the job the policy runs next gets its memory back while another "
      "computes; off: only in its own turn"},
     kBoolForms, parse_prefetch},
};

OptionInfo g_infos[sizeof kOptions / sizeof kOptions[0]];

// Unknown GSHARE_* names. One close to a known name is a typo and is
// refused: GSHARE_MEM_LIMT=4GiB must not run without a limit. "Close" is,
// ignoring case, an edit distance of at most 2 (a transposition of two
// neighbours counts as one edit) or the same letters in another order
// (GSHARE_LIMIT_MEM). Any other GSHARE_* name is not gshare's to refuse (a
// wrapper's own variable, a newer gshare's): it gets one warning.
constexpr size_t kTypoDistance = 2;
constexpr size_t kNameChars = 64;

char upper(char c) { return c >= 'a' && c <= 'z' ? char(c - 'a' + 'A') : c; }

// Optimal string alignment distance: insertions, deletions, substitutions
// and transpositions of adjacent characters, case-insensitive.
size_t distance(const char* a, size_t la, const char* b) {
  size_t lb = strlen(b);
  if (la >= kNameChars || lb >= kNameChars) return kNameChars;
  size_t rows[3][kNameChars];
  size_t *before = rows[0], *previous = rows[1], *row = rows[2];
  for (size_t j = 0; j <= lb; ++j) previous[j] = j;
  for (size_t i = 1; i <= la; ++i) {
    row[0] = i;
    for (size_t j = 1; j <= lb; ++j) {
      size_t cost = upper(a[i - 1]) == upper(b[j - 1]) ? 0 : 1;
      size_t best = previous[j - 1] + cost;
      if (previous[j] + 1 < best) best = previous[j] + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      if (i > 1 && j > 1 && upper(a[i - 1]) == upper(b[j - 2]) &&
          upper(a[i - 2]) == upper(b[j - 1]) && before[j - 2] + 1 < best)
        best = before[j - 2] + 1;
      row[j] = best;
    }
    size_t* oldest = before;
    before = previous;
    previous = row;
    row = oldest;
  }
  return previous[lb];
}

// The same letters, in any order (case-insensitive).
bool same_letters(const char* a, size_t la, const char* b) {
  if (la != strlen(b)) return false;
  int counts[256] = {};
  for (size_t i = 0; i < la; ++i) {
    counts[static_cast<unsigned char>(upper(a[i]))]++;
    counts[static_cast<unsigned char>(upper(b[i]))]--;
  }
  for (int c : counts)
    if (c != 0) return false;
  return true;
}

// The known name an unknown one is a typo of, or nullptr.
const char* typo_of(const char* name, size_t name_len) {
  const char* best = nullptr;
  size_t best_distance = kTypoDistance + 1;
  for (const OptionRow& row : kOptions) {
    size_t d = same_letters(name, name_len, row.info.name) ? 1 : distance(name, name_len, row.info.name);
    if (d < best_distance) best = row.info.name, best_distance = d;
  }
  return best;
}

// Appends `name` to the list of ignored names, comma-separated; an
// ellipsis ends a list that does not fit.
void note_ignored(Options* out, const char* name) {
  out->ignored_count++;
  size_t used = strlen(out->ignored);
  size_t need = strlen(name) + (used ? 2 : 0);
  if (used + need + 4 >= sizeof out->ignored) {
    if (used + 4 < sizeof out->ignored && strstr(out->ignored, "\u2026") == nullptr)
      memcpy(out->ignored + used, "\u2026", 4);  // "…" and its NUL
    return;
  }
  snprintf(out->ignored + used, sizeof out->ignored - used, "%s%s", used ? ", " : "", name);
}

}  // namespace

uint64_t SizeSpec::resolve(uint64_t gpu_bytes) const {
  switch (kind) {
    case kBytes: return bytes;
    case kPercent: return uint64_t(double(gpu_bytes) * percent / 100.0);
    case kUnset: break;
  }
  return gpu_bytes;
}

const OptionInfo* option_table(size_t* count) {
  *count = sizeof kOptions / sizeof kOptions[0];
  for (size_t i = 0; i < *count; ++i) g_infos[i] = kOptions[i].info;
  return g_infos;
}

bool option_value_is_valid(const char* name, const char* value, const char** accepted) {
  if (accepted) *accepted = nullptr;
  for (const OptionRow& row : kOptions) {
    if (strcmp(row.info.name, name) != 0) continue;
    Options scratch;
    if (row.parse(value, &scratch)) return true;
    if (accepted) *accepted = row.accepted;
    return false;
  }
  return false;
}

bool parse_bool(const char* text, bool* out) {
  static const char* const kTrue[] = {"1", "true", "yes", "on"};
  static const char* const kFalse[] = {"0", "false", "no", "off"};
  for (const char* t : kTrue)
    if (strcasecmp(text, t) == 0) return *out = true, true;
  for (const char* f : kFalse)
    if (strcasecmp(text, f) == 0) return *out = false, true;
  return false;
}

bool parse_size(const char* text, SizeSpec* out) {
  // Number: plain decimal (digits, optionally '.' and more digits), then an
  // optional unit or '%'.
  const char* p = text;
  while (*p >= '0' && *p <= '9') ++p;
  if (p == text) return false;
  bool fraction = *p == '.';
  if (fraction) {
    const char* decimals = ++p;
    while (*p >= '0' && *p <= '9') ++p;
    if (p == decimals) return false;
  }
  if (p - text > 32) return false;
  char number[40];
  memcpy(number, text, size_t(p - text));
  number[p - text] = '\0';
  const char* unit = p;
  SizeSpec parsed;
  if (strcmp(unit, "%") == 0) {
    double percent = strtod(number, nullptr);
    if (!(percent > 0.0 && percent <= 100.0)) return false;
    parsed.kind = SizeSpec::kPercent;
    parsed.percent = percent;
  } else {
    static const struct { const char* name; double scale; } kUnits[] = {
        {"", 1},       {"B", 1},
        {"K", 0x1p10}, {"KiB", 0x1p10}, {"KB", 1e3},
        {"M", 0x1p20}, {"MiB", 0x1p20}, {"MB", 1e6},
        {"G", 0x1p30}, {"GiB", 0x1p30}, {"GB", 1e9},
        {"T", 0x1p40}, {"TiB", 0x1p40}, {"TB", 1e12},
    };
    bool known = false;
    for (const auto& u : kUnits) {
      if (strcmp(unit, u.name) != 0) continue;
      if (u.scale == 1 && fraction) return false;  // a fraction of a byte
      double bytes = std::floor(strtod(number, nullptr) * u.scale);
      if (!(bytes >= 1.0 && bytes < 0x1p63)) return false;  // zero or absurd
      parsed.kind = SizeSpec::kBytes;
      parsed.bytes = uint64_t(bytes);
      known = true;
      break;
    }
    if (!known) return false;
  }
  // Short enough by now: the number is at most 32 characters, the unit 3.
  snprintf(parsed.text, sizeof parsed.text, "%s", text);
  *out = parsed;
  return true;
}

uint64_t quota_on_gpu(const SizeSpec& limit, uint64_t gpu_bytes) {
  uint64_t quota = limit.resolve(gpu_bytes);
  if (quota <= gpu_bytes) return quota;
  // GSHARE_MEM_LIMIT=1T on an 8 GiB GPU is most likely a slip (a unit, a
  // digit): say that the quota is then the whole GPU, once per process.
  static std::atomic<bool> told{false};
  if (!told.exchange(true, std::memory_order_relaxed))
    GSHARE_WARN("GSHARE_MEM_LIMIT=%s is more than the GPU's memory (%.2f GiB, %llu bytes): this "
                "process's quota is the whole GPU", limit.text, double(gpu_bytes) / 0x1p30,
                (unsigned long long)gpu_bytes);
  return gpu_bytes;
}

bool parse_options(const char* const* environment, Options* out, char* error, size_t error_len) {
  *out = Options{};
  const size_t count = sizeof kOptions / sizeof kOptions[0];
  for (const char* const* entry = environment; entry && *entry; ++entry) {
    const char* kv = *entry;
    if (strncmp(kv, "GSHARE_", 7) != 0) continue;
    const char* equals = strchr(kv, '=');
    if (!equals) continue;
    size_t name_len = size_t(equals - kv);
    const char* value = equals + 1;
    const OptionRow* row = nullptr;
    for (size_t i = 0; i < count; ++i) {
      if (strlen(kOptions[i].info.name) == name_len &&
          strncmp(kOptions[i].info.name, kv, name_len) == 0) {
        row = &kOptions[i];
        break;
      }
    }
    if (!row) {
      // The name is untrusted text on its way to a terminal: escaped.
      char name[kNameChars + 8];
      escape_text(kv, name_len, name, sizeof name);
      if (const char* meant = typo_of(kv, name_len)) {
        snprintf(error, error_len,
                 "%s is not a gshare variable (did you mean %s?); refusing to start without it "
                 "rather than run with settings you did not ask for", name, meant);
        return false;
      }
      note_ignored(out, name);
      continue;
    }
    if (!row->parse(value, out)) {
      char shown[kShownValueChars];
      escape_text(value, shown, sizeof shown);
      snprintf(error, error_len, "%s=%s is not valid; accepted: %s", row->info.name, shown,
               row->accepted);
      return false;
    }
  }
  // Paging's own policy, unless one was named: it orders turns so that
  // page-ins hide behind compute, and is fair while nothing is paged out.
  if (out->paging && !out->policy_given) out->policy = Policy::kPrefetch;
  // Told once, here, since parse_options runs once per process (at cuInit),
  // after the whole environment is read: GSHARE_LOG may come later in it.
  if (out->ignored_count > 0 && out->log_level >= LogLevel::kWarn)
    log_message(LogLevel::kWarn,
                "ignoring %s: not %s gshare knows (`gshare-top --help-env` lists them), and "
                "not close enough to one to be a typo", out->ignored,
                out->ignored_count == 1 ? "a variable" : "variables");
  return true;
}

}  // namespace gshare
