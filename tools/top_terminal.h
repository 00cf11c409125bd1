// The live screen of gshare-top. A TerminalSession owns the terminal while
// it exists: alternate screen, hidden cursor, keys read one at a time without
// echo. It gives the terminal back, exactly as it found it, on every way out:
//
//   q, normal return, exception     ~TerminalSession
//   SIGINT (Ctrl-C), SIGTERM,       the handler gives the terminal back, then
//   SIGHUP, SIGQUIT                 re-raises the signal with its default
//                                   action, so the exit status tells the
//                                   parent which signal ended us
//   SIGTSTP (Ctrl-Z)                gives it back and stops; on SIGCONT takes
//                                   it again and asks for a redraw
//
// A signal that was ignored when the session began (nohup, a background job
// of a non-interactive shell) stays ignored. Handlers only call
// async-signal-safe functions: write(), tcsetattr(), sigaction(),
// sigprocmask() and raise(). SIGWINCH wakes wait_until through a pipe, so a
// resize that lands between two checks is never lost.
//
// One session at a time per process (the handlers need global state).
#pragma once

#include <chrono>
#include <cstddef>
#include <vector>

#include "tools/top_text.h"

namespace gshare::top {

class TerminalSession {
 public:
  // Takes the terminal of stdout; keys come from stdin when it is a
  // terminal, else from /dev/tty (without either, only signals end the
  // session: see reads_keys). Throws
  // std::system_error if the wake-up pipe cannot be made.
  TerminalSession();
  ~TerminalSession();
  TerminalSession(const TerminalSession&) = delete;
  TerminalSession& operator=(const TerminalSession&) = delete;

  enum class Event {
    kTimeout,  // the deadline passed
    kQuit,     // q or Q, or the terminal went away
    kRedraw,   // resized, continued after Ctrl-Z, or Ctrl-L: draw the last frame again
  };
  Event wait_until(std::chrono::steady_clock::time_point deadline);
  bool reads_keys() const;

  struct Size {
    size_t columns;
    size_t rows;
  };
  static Size size();

  // Draws `lines` from the top-left corner, each clipped to the width, as
  // many as fit, and clears the rest of the screen, in one write.
  void draw(const std::vector<TextLine>& lines) const;
};

}  // namespace gshare::top
