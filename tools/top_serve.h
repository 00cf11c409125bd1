// gshare-top --serve: the Prometheus exposition over HTTP (cpp-httplib), a
// fresh snapshot of the regions per scrape of /metrics, until SIGINT or
// SIGTERM. Built into gshare-top alone, so that nothing else links the HTTP
// library.
#pragma once

#include <string>

#include "tools/top_cli.h"

namespace gshare::top {

// Serves until SIGINT or SIGTERM; returns the exit status: 0 after such a
// signal, 2 for a host that does not resolve, 1 if it cannot listen (the
// port is taken) or the server fails. Says why on stderr, one line.
int serve_metrics(const ListenAddress& address, const std::string& dir);

}  // namespace gshare::top
