// A keep-alive HTTP/1.1 GET load generator for scripts/bench-server's static-file rows (no
// wrk, ab or h2load here): one thread, poll(2), C connections each sending GET TARGET, reading
// the answer by its Content-Length and sending the next, for S seconds.
//
//   swiftc -O bench/http_load.swift -o http_load
//   http_load PORT TARGET CONNECTIONS SECONDS
//
// Prints "requests N bytes B seconds S errors E" (B: body bytes; E: answers that were not
// 200 or connections that ended).
import Glibc

let arguments = CommandLine.arguments
guard arguments.count == 5, let port = UInt16(arguments[1]), let count = Int(arguments[3]), let seconds = Double(arguments[4]) else {
    print("usage: http_load PORT TARGET CONNECTIONS SECONDS")
    exit(2)
}
let request = Array("GET \(arguments[2]) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)

struct Connection {
    var fd: Int32
    var head: [UInt8] = []
    var bodyLeft = -1  // -1: reading the head
}

func now() -> Double {
    var t = timespec()
    clock_gettime(CLOCK_MONOTONIC, &t)
    return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
}

func send(_ fd: Int32) {
    _ = request.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
}

var connections: [Connection] = []
for i in 0..<count {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else { print("connect failed: \(String(cString: strerror(errno)))"); exit(1) }
    var one: Int32 = 1
    setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    connections.append(Connection(fd: fd))
}

var buffer = [UInt8](repeating: 0, count: 1 << 18)
var polled = connections.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
var (requests, bytes, errors) = (0, 0, 0)
var open = count
let start = now()
let end = start + seconds
for connection in connections { send(connection.fd) }

/// Consumes `n` bytes of `buffer` for connection `i`: the head (its Content-Length and
/// status), then the body; each answer done sends the next request.
func consume(_ i: Int, _ n: Int) {
    var offset = 0
    while offset < n {
        if connections[i].bodyLeft < 0 {
            let take = buffer[offset..<n]
            connections[i].head.append(contentsOf: take)
            let head = connections[i].head
            guard let endIndex = findHeadEnd(head) else { return }
            let used = endIndex - (head.count - take.count)
            offset += used
            let text = String(decoding: head[..<endIndex], as: UTF8.self)
            if !text.hasPrefix("HTTP/1.1 200") { errors += 1 }
            var length = 0
            for line in text.split(separator: "\r\n") where line.lowercased().hasPrefix("content-length:") {
                length = Int(line.split(separator: ":")[1].trimmingPrefix(" ")) ?? 0
            }
            connections[i].head = []
            connections[i].bodyLeft = length
        }
        let piece = min(connections[i].bodyLeft, n - offset)
        connections[i].bodyLeft -= piece
        bytes += piece
        offset += piece
        if connections[i].bodyLeft == 0 {
            connections[i].bodyLeft = -1
            requests += 1
            if now() < end { send(connections[i].fd) }
        }
    }
}

func findHeadEnd(_ head: [UInt8]) -> Int? {
    guard head.count >= 4 else { return nil }
    for k in 3..<head.count where head[k] == 10 && head[k - 1] == 13 && head[k - 2] == 10 && head[k - 3] == 13 { return k + 1 }
    return nil
}

while now() < end && open > 0 {
    let ready = poll(&polled, nfds_t(polled.count), 100)
    guard ready > 0 else { continue }
    for i in polled.indices where polled[i].revents != 0 {
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(connections[i].fd, $0.baseAddress, $0.count, 0) }
            if n > 0 { consume(i, n); if n < buffer.count { break } else { continue } }
            if n == 0 || (errno != EAGAIN && errno != EINTR) {
                errors += 1
                open -= 1
                polled[i].fd = -1
            }
            break
        }
    }
}
let elapsed = now() - start
print("requests \(requests) bytes \(bytes) seconds \(elapsed) errors \(errors)")
