// Whether an HTTP client is still there. cpp-httplib 0.11 gives a handler the
// request's addresses but not its socket, and no way to learn that the client
// hung up; these find the accepted socket by its two ends and look at it
// without reading from it, so that a request whose client left can leave the
// model's queue (as a cancelled gRPC call does).
#pragma once

#include <string>

namespace tessera::serve {

/// The descriptor of this process's TCP socket whose local port is local_port
/// and whose peer is remote_addr:remote_port (numeric, as getnameinfo writes
/// it), or -1 when there is none. Scans /proc/self/fd: call it once a request.
int find_connection_socket(const std::string& remote_addr, int remote_port, int local_port);

/// True when the peer of connected socket fd has closed its end (a FIN or a
/// reset arrived). Consumes nothing: data the client sent after its request
/// (a pipelined next request) stays for the server to read. A client that
/// shuts down only its sending side while it waits for the answer reads as
/// gone too (HTTP/1.1 clients do not do this).
bool peer_closed(int fd);

}  // namespace tessera::serve
