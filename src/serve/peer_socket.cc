// Finding an HTTP request's socket and looking at it (peer_socket.h).
#include "peer_socket.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace tessera::serve {
namespace {

/// addr's port (an IPv4 or IPv6 address), or -1.
int port_of(const sockaddr_storage& addr) {
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
  return -1;
}

/// addr's numeric host, as cpp-httplib writes a request's (getnameinfo, NI_NUMERICHOST).
bool numeric_host(const sockaddr_storage& addr, socklen_t len, std::string& host) {
  char buffer[NI_MAXHOST];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, buffer, sizeof(buffer), nullptr, 0, NI_NUMERICHOST) != 0) {
    return false;
  }
  host = buffer;
  return true;
}

}  // namespace

int find_connection_socket(const std::string& remote_addr, int remote_port, int local_port) {
  if (remote_port < 0 || local_port < 0) return -1;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return -1;
  int found = -1;
  while (dirent* entry = readdir(dir)) {
    int fd = -1;
    const char* name = entry->d_name;
    const char* end = name + std::strlen(name);
    if (std::from_chars(name, end, fd).ptr != end || fd < 0 || fd == dirfd(dir)) continue;
    sockaddr_storage local{}, peer{};
    socklen_t local_len = sizeof(local), peer_len = sizeof(peer);
    // Not a socket, or not a connected one: ENOTSOCK / ENOTCONN. The ports are compared first, so that
    // only the one candidate's peer host is formatted.
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0 || port_of(local) != local_port) continue;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0 || port_of(peer) != remote_port) continue;
    std::string peer_host;
    if (!numeric_host(peer, peer_len, peer_host) || peer_host != remote_addr) continue;
    found = fd;
    break;
  }
  closedir(dir);
  return found;
}

bool peer_closed(int fd) {
  pollfd p{fd, static_cast<short>(POLLIN | POLLRDHUP), 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLHUP | POLLERR | POLLNVAL | POLLRDHUP)) return true;
  if (!(p.revents & POLLIN)) return false;
  // Readable: either data (a next request) or the end of the stream.
  char byte;
  const ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

}  // namespace tessera::serve
