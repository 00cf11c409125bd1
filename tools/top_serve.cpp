#include "tools/top_serve.h"

#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include "tools/top_prometheus.h"
#include "tools/top_sample.h"

namespace gshare::top {

namespace {

// Scrapes are rare and quick: two threads answer them.
constexpr size_t kServerThreads = 2;
// An idle keep-alive connection holds its thread this long, and so delays
// stopping by as much.
constexpr time_t kKeepAliveSeconds = 1;

constexpr const char* kIndexPage =
    "<!DOCTYPE html>\n<html><head><title>gshare-top</title></head><body>\n"
    "<h1>gshare-top</h1>\n<p>Prometheus metrics of the gshare processes on this machine: "
    "<a href=\"/metrics\">/metrics</a></p>\n</body></html>\n";

// "[::1]:9400" for IPv6, as a URL writes it.
std::string host_and_port(const std::string& host, int port) {
  bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

// A name that does not resolve is bad input, not a busy port: say so apart.
bool host_resolves(const std::string& host, std::string* why) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
  if (rc != 0) {
    *why = gai_strerror(rc);
    return false;
  }
  freeaddrinfo(found);
  return true;
}

void add_routes(httplib::Server& server, const std::string& dir) {
  server.Get("/metrics", [dir](const httplib::Request&, httplib::Response& response) {
    Sample sample = take_sample(dir);
    response.set_content(render_prometheus(sample.gpus, dir, sample.dir_error),
                         kPrometheusContentType);
  });
  server.Get("/", [](const httplib::Request&, httplib::Response& response) {
    response.set_content(kIndexPage, "text/html; charset=utf-8");
  });
  server.set_error_handler([](const httplib::Request&, httplib::Response& response) {
    if (response.status == 404)
      response.set_content("404 not found: the metrics are at /metrics\n",
                           "text/plain; charset=utf-8");
  });
}

}  // namespace

int serve_metrics(const ListenAddress& address, const std::string& dir) {
  std::string why;
  if (!host_resolves(address.host, &why)) {
    fprintf(stderr, "gshare-top: --serve %s: cannot resolve %s: %s\n",
            host_and_port(address.host, address.port).c_str(), address.host.c_str(), why.c_str());
    return 2;
  }

  // The stop signals are taken by sigwait below, never by a handler: blocked
  // here, before the server starts its threads, they stay blocked in all of
  // them. SIGUSR1 is how the listening thread says it ended on its own.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // A scraper that hangs up mid-answer must not end the server.
  signal(SIGPIPE, SIG_IGN);

  httplib::Server server;
  server.new_task_queue = [] { return new httplib::ThreadPool(kServerThreads); };
  server.set_keep_alive_timeout(kKeepAliveSeconds);
  // httplib's default adds SO_REUSEPORT, with which a second server on the
  // port would share it silently instead of being told it is taken.
  server.set_socket_options([](int socket) {
    int yes = 1;
    setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  add_routes(server, dir);

  errno = 0;
  int port = address.port == 0 ? server.bind_to_any_port(address.host)
                               : (server.bind_to_port(address.host, address.port) ? address.port : -1);
  if (port < 0) {
    // httplib reports only failure; the bind's errno is still here.
    int bind_errno = errno;
    fprintf(stderr, "gshare-top: cannot listen on %s: %s\n",
            host_and_port(address.host, address.port).c_str(),
            bind_errno ? strerror(bind_errno) : "the address cannot be bound");
    return 1;
  }
  fprintf(stderr, "gshare-top: serving http://%s/metrics (regions in %s)\n",
          host_and_port(address.host, port).c_str(), dir.c_str());

  std::atomic<bool> listener_ended{false};
  std::thread listener([&] {
    server.listen_after_bind();
    listener_ended = true;
    kill(getpid(), SIGUSR1);
  });
  int signal_number = 0;
  for (;;) {
    sigwait(&signals, &signal_number);
    if (signal_number != SIGUSR1 || listener_ended) break;
  }
  // stop() does nothing before the listener runs: a signal that came at once
  // waits for it.
  while (!server.is_running() && !listener_ended)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  server.stop();
  listener.join();
  if (signal_number == SIGUSR1) {
    fprintf(stderr, "gshare-top: the server stopped unexpectedly\n");
    return 1;
  }
  return 0;
}

}  // namespace gshare::top
