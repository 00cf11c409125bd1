#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "base/options.h"

using gshare::Options;
using gshare::parse_options;
using gshare::parse_size;
using gshare::SizeSpec;

namespace {
uint64_t bytes_of(const char* text) {
  SizeSpec s;
  REQUIRE(parse_size(text, &s));
  REQUIRE(s.kind == SizeSpec::kBytes);
  return s.bytes;
}
bool rejected(const char* text) {
  SizeSpec s;
  return !parse_size(text, &s);
}
std::string parse_error(std::initializer_list<const char*> env) {
  std::vector<const char*> array(env);
  array.push_back(nullptr);
  Options o;
  char error[512] = "";
  if (parse_options(array.data(), &o, error, sizeof error)) return "";
  return error;
}
}  // namespace

TEST_CASE("sizes accept bytes, binary and decimal units") {
  CHECK(bytes_of("1073741824") == 1073741824ull);
  CHECK(bytes_of("512MiB") == 512ull << 20);
  CHECK(bytes_of("10GiB") == 10ull << 30);
  CHECK(bytes_of("10G") == 10ull << 30);
  CHECK(bytes_of("10GB") == 10000000000ull);
  CHECK(bytes_of("1.5T") == 3ull << 39);
  CHECK(bytes_of("4096B") == 4096);
  CHECK(bytes_of("64K") == 65536);
}

TEST_CASE("sizes accept a percentage of the GPU") {
  SizeSpec s;
  REQUIRE(parse_size("25%", &s));
  CHECK(s.kind == SizeSpec::kPercent);
  CHECK(s.resolve(8ull << 30) == 2ull << 30);
  REQUIRE(parse_size("12.5%", &s));
  CHECK(s.resolve(800) == 100);
  CHECK(SizeSpec{}.resolve(1234) == 1234);  // unset: the whole GPU
}

TEST_CASE("bad sizes are rejected, never read as unlimited or zero") {
  for (const char* bad : {"", "abc", "10 GiB", " 10GiB", "10GiBs", "-1", "0", "0GiB", "0%",
                          "101%", "1.5", "1.2.3G", "10g", "GiB", "%", "99999999999999999999T",
                          "1e9"}) {
    INFO(bad);
    CHECK(rejected(bad));
  }
}

TEST_CASE("options parse from the environment") {
  const char* env[] = {"PATH=/bin", "GSHARE_MEM_LIMIT=2GiB", "GSHARE_DIR=/tmp/x",
                       "GSHARE_DISABLE=no", "GSHARE_LOG=debug", nullptr};
  Options o;
  char error[512];
  REQUIRE(parse_options(env, &o, error, sizeof error));
  CHECK(o.mem_limit.bytes == 2ull << 30);
  CHECK(std::string(o.dir) == "/tmp/x");
  CHECK_FALSE(o.disable);
  CHECK(o.log_level == gshare::LogLevel::kDebug);
}

TEST_CASE("defaults hold when nothing is set") {
  const char* env[] = {"HOME=/root", nullptr};
  Options o;
  char error[512];
  REQUIRE(parse_options(env, &o, error, sizeof error));
  CHECK(o.mem_limit.kind == SizeSpec::kUnset);
  CHECK(std::string(o.dir) == "/dev/shm");
  CHECK(std::string(o.group).empty());
}

TEST_CASE("a bad value names the variable, the value and the accepted forms") {
  std::string e = parse_error({"GSHARE_MEM_LIMIT=lots"});
  CHECK(e.find("GSHARE_MEM_LIMIT=lots") != std::string::npos);
  CHECK(e.find("512MiB") != std::string::npos);
  CHECK(e.find("25%") != std::string::npos);
  CHECK_FALSE(parse_error({"GSHARE_DISABLE=maybe"}).empty());
  CHECK_FALSE(parse_error({"GSHARE_DIR=relative/path"}).empty());
  CHECK_FALSE(parse_error({"GSHARE_LOG=loud"}).empty());
}

TEST_CASE("a misspelt variable is an error with a suggestion") {
  std::string e = parse_error({"GSHARE_MEM_LIMT=4GiB"});
  CHECK(e.find("GSHARE_MEM_LIMT") != std::string::npos);
  CHECK(e.find("did you mean GSHARE_MEM_LIMIT") != std::string::npos);
}

TEST_CASE("the table documents every variable") {
  size_t count = 0;
  const gshare::OptionInfo* table = gshare::option_table(&count);
  REQUIRE(count >= 5);
  for (size_t i = 0; i < count; ++i) {
    CHECK(std::strncmp(table[i].name, "GSHARE_", 7) == 0);
    CHECK(std::strlen(table[i].description) > 10);
    CHECK(std::strlen(table[i].default_value) > 0);
  }
}

TEST_CASE("the README lists every variable in its table") {
  std::ifstream file(std::string(GSHARE_SOURCE_DIR) + "/README.md");
  REQUIRE(file);
  std::stringstream readme;
  readme << file.rdbuf();
  size_t count = 0;
  const gshare::OptionInfo* table = gshare::option_table(&count);
  for (size_t i = 0; i < count; ++i) {
    INFO(table[i].name);
    CHECK(readme.str().find(std::string("| `") + table[i].name + "` |") != std::string::npos);
  }
}

TEST_CASE("scheduling options parse from the environment") {
  const char* env[] = {"GSHARE_POLICY=SRTF", "GSHARE_QUANTUM_MS=12.5", "GSHARE_WEIGHT=3",
                       "GSHARE_PRIORITY=-7", "GSHARE_EXPECTED_SECONDS=90", "GSHARE_EXPECTED_ITERS=5000",
                       "GSHARE_IDLE_MS=20", "GSHARE_HANDOVER=strict", "GSHARE_SLICE_MAX_MS=0",
                       "GSHARE_SHARED_TURNS=off", nullptr};
  Options o;
  char error[512];
  REQUIRE(parse_options(env, &o, error, sizeof error));
  CHECK(o.policy == gshare::Policy::kSrtf);
  CHECK(o.policy_given);
  CHECK(o.quantum_ms == 12.5);
  CHECK(o.weight == 3);
  CHECK(o.priority == -7);
  CHECK(o.expected_seconds == 90);
  CHECK(o.expected_iters == 5000);
  CHECK(o.idle_ms == 20);
  CHECK(o.strict_handover);
  CHECK(o.slice_max_ms == 0);
  CHECK(o.shared_turns == gshare::SharedTurns::kOff);
}

TEST_CASE("scheduling defaults: fair, not asked for, 20 ms quanta, weight 1, overlap, shared turns where gaps") {
  const char* env[] = {nullptr};
  Options o;
  char error[512];
  REQUIRE(parse_options(env, &o, error, sizeof error));
  CHECK(o.policy == gshare::Policy::kFair);
  CHECK_FALSE(o.policy_given);
  CHECK(o.quantum_ms == 20);
  CHECK(o.weight == 1);
  CHECK(o.priority == 0);
  CHECK(o.expected_seconds == 0);
  CHECK(o.expected_iters == 0);
  CHECK_FALSE(o.strict_handover);
  CHECK(o.shared_turns == gshare::SharedTurns::kGaps);
}

TEST_CASE("GSHARE_SHARED_TURNS takes on, off, gaps and pairs, and nothing else") {
  const std::pair<const char*, gshare::SharedTurns> cases[] = {
      {"GSHARE_SHARED_TURNS=on", gshare::SharedTurns::kHostBound},
      {"GSHARE_SHARED_TURNS=1", gshare::SharedTurns::kHostBound},
      {"GSHARE_SHARED_TURNS=off", gshare::SharedTurns::kOff},
      {"GSHARE_SHARED_TURNS=gaps", gshare::SharedTurns::kGaps},
      {"GSHARE_SHARED_TURNS=Pairs", gshare::SharedTurns::kPairs},
  };
  for (const auto& [text, mode] : cases) {
    INFO(text);
    const char* env[] = {text, nullptr};
    Options o;
    char error[512];
    REQUIRE(parse_options(env, &o, error, sizeof error));
    CHECK(o.shared_turns == mode);
  }
  const char* bad[] = {"GSHARE_SHARED_TURNS=gap", nullptr};
  Options o;
  char error[512];
  CHECK_FALSE(parse_options(bad, &o, error, sizeof error));
  CHECK(std::string(error).find("GSHARE_SHARED_TURNS") != std::string::npos);
}

TEST_CASE("paging makes prefetch the default policy, never over a policy asked for") {
  char error[512];
  const char* paging[] = {"GSHARE_PAGING=on", nullptr};
  Options o;
  REQUIRE(parse_options(paging, &o, error, sizeof error));
  CHECK(o.policy == gshare::Policy::kPrefetch);
  CHECK_FALSE(o.policy_given);
  CHECK(o.prefetch);
  const char* asked[] = {"GSHARE_PAGING=on", "GSHARE_POLICY=fifo", "GSHARE_PREFETCH=off", nullptr};
  Options p;
  REQUIRE(parse_options(asked, &p, error, sizeof error));
  CHECK(p.policy == gshare::Policy::kFifo);
  CHECK_FALSE(p.prefetch);
  const char* bad[] = {"GSHARE_PREFETCH=maybe", nullptr};
  Options q;
  CHECK_FALSE(parse_options(bad, &q, error, sizeof error));
  CHECK(std::string(error).find("GSHARE_PREFETCH") != std::string::npos);
}

TEST_CASE("bad scheduling values are refused, never clamped") {
  for (const char* bad : {"GSHARE_POLICY=lottery", "GSHARE_POLICY=", "GSHARE_QUANTUM_MS=0",
                          "GSHARE_QUANTUM_MS=-5", "GSHARE_QUANTUM_MS=10ms", "GSHARE_WEIGHT=0",
                          "GSHARE_WEIGHT=1.5", "GSHARE_WEIGHT=1001", "GSHARE_PRIORITY=high",
                          "GSHARE_PRIORITY=5000", "GSHARE_EXPECTED_SECONDS=0",
                          "GSHARE_EXPECTED_ITERS=-1", "GSHARE_EXPECTED_ITERS=1e3",
                          "GSHARE_IDLE_MS=never", "GSHARE_HANDOVER=fast", "GSHARE_SLICE_MAX_MS=-1"}) {
    INFO(bad);
    CHECK_FALSE(parse_error({bad}).empty());
  }
}

namespace {
// What gshare writes to stderr (fd 2) while `body` runs.
template <class Body>
std::string stderr_of(Body body) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  int saved = dup(2);
  dup2(fds[1], 2);
  close(fds[1]);
  body();
  dup2(saved, 2);
  close(saved);
  std::string text;
  char buffer[4096];
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  for (ssize_t n; (n = read(fds[0], buffer, sizeof buffer)) > 0;) text.append(buffer, size_t(n));
  close(fds[0]);
  return text;
}

bool has_control_bytes(const std::string& text) {
  for (unsigned char c : text)
    if (c < 0x20 || c == 0x7F) return true;
  return false;
}

size_t lines_in(const std::string& text) {
  size_t n = 0;
  for (char c : text) n += c == '\n';
  return n;
}
}  // namespace

TEST_CASE("numbers are plain decimal: no hex, exponent, sign or whitespace") {
  for (const char* name : {"GSHARE_QUANTUM_MS", "GSHARE_IDLE_MS", "GSHARE_SLICE_MAX_MS",
                           "GSHARE_ADMIT_TIMEOUT_S", "GSHARE_EXPECTED_SECONDS", "GSHARE_WEIGHT",
                           "GSHARE_PRIORITY", "GSHARE_EXPECTED_ITERS"}) {
    for (const char* bad : {"0x14", "0X14", " 20", "20 ", "\n10", "10\n", "\t10", "0X1p4", "2e1",
                            "2E1", "+20", "inf", "nan", "20.", ".5", "1..2", "1.2.3", "", "-",
                            "20ms", "1,5", "99999999999999999999999999"}) {
      std::string entry = std::string(name) + "=" + bad;
      INFO(entry);
      CHECK_FALSE(parse_error({entry.c_str()}).empty());
    }
  }
  // What stays accepted: plain digits, a fraction where it means something,
  // a sign where negatives do.
  const char* env[] = {"GSHARE_QUANTUM_MS=20", "GSHARE_IDLE_MS=0.5", "GSHARE_SLICE_MAX_MS=150",
                       "GSHARE_ADMIT_TIMEOUT_S=0", "GSHARE_EXPECTED_SECONDS=1.25",
                       "GSHARE_WEIGHT=007", "GSHARE_PRIORITY=-1000", "GSHARE_EXPECTED_ITERS=12",
                       nullptr};
  Options o;
  char error[512] = "";
  INFO(error);
  REQUIRE(parse_options(env, &o, error, sizeof error));
  CHECK(o.quantum_ms == 20);
  CHECK(o.idle_ms == 0.5);
  CHECK(o.admit_timeout_s == 0);
  CHECK(o.expected_seconds == 1.25);
  CHECK(o.weight == 7);
  CHECK(o.priority == -1000);
  CHECK(o.expected_iters == 12);
  for (const char* bad : {"GSHARE_WEIGHT=1.0", "GSHARE_PRIORITY=1.5", "GSHARE_WEIGHT=-1",
                          "GSHARE_EXPECTED_ITERS=-0"}) {
    INFO(bad);
    CHECK_FALSE(parse_error({bad}).empty());
  }
}

TEST_CASE("sizes are plain decimal too") {
  for (const char* bad : {"0x10G", "0X1p4G", "1e3", "1E3G", " 1G", "1G ", "\n1G", "+1G", "5.G",
                          ".5G", "1.5.G", "inf", "nanG"}) {
    INFO(bad);
    CHECK(rejected(bad));
  }
  CHECK(bytes_of("0.5G") == 512ull << 20);
}

TEST_CASE("a numeric GSHARE_GROUP is a plain gid, never one a numeric parse bends") {
  for (const char* bad : {"GSHARE_GROUP= 12", "GSHARE_GROUP=+12", "GSHARE_GROUP=-1",
                          "GSHARE_GROUP=4294967295", "GSHARE_GROUP=99999999999",
                          "GSHARE_GROUP=a b", "GSHARE_GROUP=video\n", "GSHARE_GROUP=a:b"}) {
    INFO(bad);
    CHECK_FALSE(parse_error({bad}).empty());
  }
  for (const char* good : {"GSHARE_GROUP=12", "GSHARE_GROUP=video", "GSHARE_GROUP=gpu-users"}) {
    INFO(good);
    CHECK(parse_error({good}).empty());
  }
}

TEST_CASE("a size beyond the GPU is the whole GPU, with one warning naming both") {
  SizeSpec one_tib;
  REQUIRE(parse_size("1T", &one_tib));
  std::string told = stderr_of([&] {
    CHECK(gshare::quota_on_gpu(one_tib, 8ull << 30) == 8ull << 30);
    CHECK(gshare::quota_on_gpu(one_tib, 8ull << 30) == 8ull << 30);  // once per process
  });
  CHECK(lines_in(told) == 1);
  CHECK(told.find("GSHARE_MEM_LIMIT=1T") != std::string::npos);
  CHECK(told.find("8.00 GiB") != std::string::npos);
  CHECK(told.find("whole GPU") != std::string::npos);
  SizeSpec two_gib;
  REQUIRE(parse_size("2GiB", &two_gib));
  CHECK(gshare::quota_on_gpu(two_gib, 8ull << 30) == 2ull << 30);
  CHECK(gshare::quota_on_gpu(SizeSpec{}, 8ull << 30) == 8ull << 30);  // unset: the whole GPU
}

TEST_CASE("a name close to a known one is refused as a typo") {
  for (const char* typo : {"GSHARE_MEM_LIMT=4GiB",      // a letter missing
                           "GSHARE_MEM_LIMITT=4GiB",    // one too many
                           "GSHARE_MEM_LIMTI=4GiB",     // neighbours swapped
                           "GSHARE_MEMLIMT=4GiB",       // two edits
                           "GSHARE_mem_limit=4GiB",     // case
                           "GSHARE_LIMIT_MEM=4GiB",     // the same letters, reordered
                           "GSHARE_QUANTUM_SM=10", "GSHARE_POLCIY=fifo", "GSHARE_DIRS=/tmp"}) {
    INFO(typo);
    std::string e = parse_error({typo});
    CHECK(e.find("did you mean GSHARE_") != std::string::npos);
  }
  CHECK(parse_error({"GSHARE_LIMIT_MEM=4GiB"}).find("did you mean GSHARE_MEM_LIMIT") !=
        std::string::npos);
}

TEST_CASE("any other unknown GSHARE_ name is ignored after one warning") {
  const char* env[] = {"GSHARE_WRAPPER_TOKEN=abc", "GSHARE_MEM_LIMIT=2GiB", "GSHARE_X=1", nullptr};
  Options o;
  char error[512] = "";
  bool ok = false;
  std::string told = stderr_of([&] { ok = parse_options(env, &o, error, sizeof error); });
  INFO(error);
  REQUIRE(ok);
  CHECK(o.mem_limit.bytes == 2ull << 30);  // the rest still applies
  CHECK(o.ignored_count == 2);
  CHECK(std::string(o.ignored) == "GSHARE_WRAPPER_TOKEN, GSHARE_X");
  CHECK(lines_in(told) == 1);
  CHECK(told.find("GSHARE_WRAPPER_TOKEN, GSHARE_X") != std::string::npos);
  // GSHARE_LOG=quiet silences it, wherever it stands in the environment.
  const char* quiet[] = {"GSHARE_UNRELATED=1", "GSHARE_LOG=quiet", nullptr};
  CHECK(stderr_of([&] { REQUIRE(parse_options(quiet, &o, error, sizeof error)); }).empty());
  CHECK(o.ignored_count == 1);
}

TEST_CASE("values and names from the environment reach messages escaped") {
  std::string e = parse_error({"GSHARE_QUANTUM_MS=\n10\x1b[31m\t\x7f"});
  CHECK_FALSE(has_control_bytes(e));
  CHECK(e.find("GSHARE_QUANTUM_MS=?10?[31m??") != std::string::npos);
  e = parse_error({"GSHARE_MEM_LIMIT=\x1b]0;owned\x07"});
  CHECK_FALSE(has_control_bytes(e));
  CHECK(e.find("GSHARE_MEM_LIMIT=?]0;owned?") != std::string::npos);
  e = parse_error({"GSHARE_MEM_LIMI\x1b=1G"});  // a typo with an escape in its name
  CHECK_FALSE(has_control_bytes(e));
  CHECK(e.find("GSHARE_MEM_LIMI?") != std::string::npos);

  const char* env[] = {"GSHARE_\x1b[2Jsomething_else\n=1", nullptr};
  Options o;
  char error[512] = "";
  std::string told = stderr_of([&] { REQUIRE(parse_options(env, &o, error, sizeof error)); });
  CHECK(lines_in(told) == 1);
  CHECK_FALSE(has_control_bytes(told.substr(0, told.size() - 1)));
  CHECK(told.find("GSHARE_?[2Jsomething_else?") != std::string::npos);
}

TEST_CASE("every message is one terminal-safe line, whatever it quotes") {
  // A region's GPU UUID or command, a path from GSHARE_DIR: whatever the
  // format quotes, the line written has no control bytes and no broken
  // UTF-8, and valid UTF-8 passes through.
  std::string told = stderr_of([] {
    gshare::log_message(gshare::LogLevel::kError, "region %s: %s", "GPU-\x1b]2;title\x07",
                        "a\nb\r\x9b" "c \xc2\x9b \xe2\x80\xa6 \xc3");
  });
  CHECK(told == "gshare: region GPU-?]2;title?: a?b??c ?? \xe2\x80\xa6 ?\n");

  char out[16];
  CHECK(gshare::escape_text("ok\x1b", out, sizeof out) == 3);
  CHECK(std::string(out) == "ok?");
  // Cut at a sequence boundary, never inside one.
  CHECK(gshare::escape_text("ab\xe2\x80\xa6", out, 5) == 2);
  CHECK(std::string(out) == "ab");
}
