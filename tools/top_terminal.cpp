#include "tools/top_terminal.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <stdexcept>
#include <string>
#include <system_error>

#include "tools/top_format.h"

namespace gshare::top {

namespace {

// Alternate screen, cursor hidden, screen cleared / attributes off, cursor
// shown, main screen back.
constexpr char kTakeSequence[] = "\x1b[?1049h\x1b[?25l\x1b[2J";
constexpr char kGiveBackSequence[] = "\x1b[0m\x1b[?25h\x1b[?1049l";

constexpr int kExitSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

// Written before any handler is installed, only read by the handlers.
struct TerminalState {
  int key_fd = -1;  // stdin when it is a terminal, else /dev/tty, else none
  bool key_fd_opened = false;  // key_fd is our /dev/tty, to close at the end
  termios saved{};  // as we found it
  termios live{};   // non-canonical, no echo
  int wake_read = -1;
  int wake_write = -1;
  struct sigaction previous[NSIG] = {};  // to put back at the end
  bool installed[NSIG] = {};
};
TerminalState g_state;
volatile sig_atomic_t g_terminal_taken = 0;
bool g_session_exists = false;

void write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the terminal is gone; nothing left to restore it for
    data += n;
    size -= size_t(n);
  }
}

void take_terminal() {
  if (g_state.key_fd >= 0) tcsetattr(g_state.key_fd, TCSANOW, &g_state.live);
  write_all(STDOUT_FILENO, kTakeSequence, sizeof kTakeSequence - 1);
  g_terminal_taken = 1;
}

void give_back_terminal() {
  if (!g_terminal_taken) return;
  g_terminal_taken = 0;
  write_all(STDOUT_FILENO, kGiveBackSequence, sizeof kGiveBackSequence - 1);
  if (g_state.key_fd >= 0) tcsetattr(g_state.key_fd, TCSANOW, &g_state.saved);
}

void wake_waiter() {
  char byte = 'w';
  ssize_t ignored = write(g_state.wake_write, &byte, 1);  // full pipe: a wake-up is pending anyway
  (void)ignored;
}

void set_action(int signal_number, void (*handler)(int)) {
  struct sigaction action = {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  for (int s : kExitSignals) sigaddset(&action.sa_mask, s);
  sigaddset(&action.sa_mask, SIGTSTP);
  sigaction(signal_number, &action, nullptr);
}

void on_exit_signal(int signal_number) {
  give_back_terminal();
  set_action(signal_number, SIG_DFL);
  raise(signal_number);  // blocked until this handler returns, then fatal
}

void on_resize(int) {
  int saved_errno = errno;
  wake_waiter();
  errno = saved_errno;
}

void on_stop(int) {
  int saved_errno = errno;
  give_back_terminal();
  set_action(SIGTSTP, SIG_DFL);
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTSTP);
  sigprocmask(SIG_UNBLOCK, &stop, nullptr);
  raise(SIGTSTP);  // stops here; returns after SIGCONT
  set_action(SIGTSTP, on_stop);
  take_terminal();
  wake_waiter();
  errno = saved_errno;
}

void install(int signal_number, void (*handler)(int)) {
  struct sigaction previous;
  sigaction(signal_number, nullptr, &previous);
  if (previous.sa_handler == SIG_IGN) return;
  g_state.previous[signal_number] = previous;
  g_state.installed[signal_number] = true;
  set_action(signal_number, handler);
}

void uninstall_all() {
  for (int s = 1; s < NSIG; ++s) {
    if (!g_state.installed[s]) continue;
    sigaction(s, &g_state.previous[s], nullptr);
    g_state.installed[s] = false;
  }
}

sigset_t handled_signals() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : kExitSignals) sigaddset(&set, s);
  sigaddset(&set, SIGTSTP);
  sigaddset(&set, SIGWINCH);
  return set;
}

void make_wake_pipe() {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
    throw std::system_error(errno, std::generic_category(), "cannot create a pipe");
  g_state.wake_read = fds[0];
  g_state.wake_write = fds[1];
}

void drain_wake_pipe() {
  char buffer[64];
  while (read(g_state.wake_read, buffer, sizeof buffer) > 0) {
  }
}

// Keys come from stdin, or from the controlling terminal when stdin is
// redirected (gshare-top < /dev/null), so that q still quits.
void open_key_source() {
  if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &g_state.saved) == 0) {
    g_state.key_fd = STDIN_FILENO;
    return;
  }
  int tty = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (tty < 0) return;
  if (tcgetattr(tty, &g_state.saved) != 0) {
    close(tty);
    return;
  }
  g_state.key_fd = tty;
  g_state.key_fd_opened = true;
}

// What the keys typed since the last call ask for; kTimeout if nothing.
TerminalSession::Event read_keys() {
  char keys[64];
  ssize_t n = read(g_state.key_fd, keys, sizeof keys);
  if (n == 0) return TerminalSession::Event::kQuit;  // hang-up
  TerminalSession::Event event = TerminalSession::Event::kTimeout;
  for (ssize_t i = 0; i < n; ++i) {
    if (keys[i] == 'q' || keys[i] == 'Q') return TerminalSession::Event::kQuit;
    if (keys[i] == '\f') event = TerminalSession::Event::kRedraw;  // Ctrl-L
  }
  return event;
}

int milliseconds_until(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0) return 0;
  return left.count() > INT_MAX ? INT_MAX : int(left.count());
}

std::string styled(const TextLine& line, size_t columns) {
  std::string text = truncate_to_width(line.text, columns);
  switch (line.kind) {
    case TextLine::Kind::kColumnHeader:
      return "\x1b[7m" + pad_right(text, columns) + "\x1b[0m";  // reverse video, full width
    case TextLine::Kind::kTitle:
    case TextLine::Kind::kGpu:
      text = "\x1b[1m" + text + "\x1b[0m";  // bold
      break;
    default:
      break;
  }
  // Clearing after a line that fills the row would erase its last cell (the
  // cursor waits on it to wrap), so only narrower lines clear their rest.
  if (display_width(line.text) < columns) text += "\x1b[K";
  return text;
}

}  // namespace

TerminalSession::TerminalSession() {
  if (g_session_exists) throw std::logic_error("only one TerminalSession at a time");
  make_wake_pipe();
  g_session_exists = true;
  open_key_source();
  if (g_state.key_fd >= 0) {
    g_state.live = g_state.saved;
    g_state.live.c_lflag &= ~tcflag_t(ICANON | ECHO);
    g_state.live.c_cc[VMIN] = 1;  // read() after poll() returns what was typed
    g_state.live.c_cc[VTIME] = 0;
  }
  // No handler may run before the terminal is ours, nor see half a state.
  sigset_t handled = handled_signals(), previous_mask;
  sigprocmask(SIG_BLOCK, &handled, &previous_mask);
  for (int s : kExitSignals) install(s, on_exit_signal);
  install(SIGTSTP, on_stop);
  install(SIGWINCH, on_resize);
  take_terminal();
  sigprocmask(SIG_SETMASK, &previous_mask, nullptr);
}

TerminalSession::~TerminalSession() {
  sigset_t handled = handled_signals(), previous_mask;
  sigprocmask(SIG_BLOCK, &handled, &previous_mask);
  give_back_terminal();
  uninstall_all();
  // A signal that came meanwhile is delivered now, to its old action.
  sigprocmask(SIG_SETMASK, &previous_mask, nullptr);
  close(g_state.wake_read);
  close(g_state.wake_write);
  if (g_state.key_fd_opened) close(g_state.key_fd);
  g_state = TerminalState{};
  g_session_exists = false;
}

TerminalSession::Event TerminalSession::wait_until(std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    pollfd fds[2] = {{g_state.wake_read, POLLIN, 0}, {g_state.key_fd, POLLIN, 0}};
    nfds_t count = g_state.key_fd >= 0 ? 2 : 1;
    int ready = poll(fds, count, milliseconds_until(deadline));
    if (ready < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(), "poll");
    }
    if (ready == 0) return Event::kTimeout;
    if (fds[0].revents) {
      drain_wake_pipe();
      return Event::kRedraw;
    }
    if (count == 2 && fds[1].revents) {
      if (fds[1].revents & (POLLHUP | POLLERR | POLLNVAL)) return Event::kQuit;
      Event event = read_keys();
      if (event != Event::kTimeout) return event;
    }
  }
}

bool TerminalSession::reads_keys() const { return g_state.key_fd >= 0; }

TerminalSession::Size TerminalSession::size() {
  winsize ws = {};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0 || ws.ws_col == 0 || ws.ws_row == 0)
    return {80, 24};
  return {ws.ws_col, ws.ws_row};
}

void TerminalSession::draw(const std::vector<TextLine>& lines) const {
  Size screen = size();
  size_t shown = lines.size() < screen.rows ? lines.size() : screen.rows;
  std::string out = "\x1b[H";
  for (size_t i = 0; i < shown; ++i) {
    out += styled(lines[i], screen.columns);
    // No newline after the bottom row: it would scroll the screen.
    if (i + 1 < screen.rows) out += "\r\n";
  }
  if (shown < screen.rows) out += "\x1b[J";
  write_all(STDOUT_FILENO, out.data(), out.size());
}

}  // namespace gshare::top
