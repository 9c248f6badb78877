// Finding an HTTP request's socket and looking at it (peer_socket.h).
#include "peer_socket.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace tessera::serve {
namespace {

/// addr's numeric host and port, as cpp-httplib writes a request's (getnameinfo, NI_NUMERICHOST).
bool numeric_address(const sockaddr_storage& addr, socklen_t len, std::string& host, int& port) {
  char host_buffer[NI_MAXHOST], port_buffer[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host_buffer, sizeof(host_buffer), port_buffer,
                  sizeof(port_buffer), NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return false;
  }
  host = host_buffer;
  const char* end = port_buffer + std::strlen(port_buffer);
  return std::from_chars(port_buffer, end, port).ptr == end;
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
    // Not a socket, or not a connected one: ENOTSOCK / ENOTCONN.
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) continue;
    if (local.ss_family != AF_INET && local.ss_family != AF_INET6) continue;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) continue;
    std::string local_host, peer_host;
    int local_found = -1, peer_found = -1;
    if (!numeric_address(local, local_len, local_host, local_found) || local_found != local_port) continue;
    if (!numeric_address(peer, peer_len, peer_host, peer_found) || peer_found != remote_port) continue;
    if (peer_host != remote_addr) continue;
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
