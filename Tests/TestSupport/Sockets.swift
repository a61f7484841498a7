// Raw loopback sockets for tests that need a port nobody answers on.
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A TCP socket on the loopback bound to a free port: listening (the kernel completes
/// connections into the backlog, nobody ever accepts or answers them) or only bound
/// (connections to it are refused).
package final class LoopbackSocket {
    package let fd: Int32
    package let port: Int

    package init(listening: Bool) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket: \(String(cString: strerror(errno)))") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw -> Bool in
                bind(fd, raw, length) == 0 && getsockname(fd, raw, &length) == 0
            }
        }
        guard bound, !listening || listen(fd, 16) == 0 else {
            Glibc.close(fd)
            throw HarnessError("bind/listen: \(String(cString: strerror(errno)))")
        }
        self.fd = fd
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    /// Whether a connection is waiting to be accepted (no waiting).
    package var hasPendingConnection: Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) > 0
    }

    deinit { Glibc.close(fd) }
}

/// Whether this machine can bind a TCP socket to ::1.
package func ipv6LoopbackAvailable() -> Bool {
    let fd = socket(AF_INET6, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = sockaddr_in6()
    address.sin6_family = sa_family_t(AF_INET6)
    address.sin6_addr = in6addr_loopback
    return withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) == 0
        }
    }
}

/// A loopback listener whose backlog is full: the kernel drops further SYNs, so a connect
/// to it waits (a target that does not answer) without anything leaving the machine.
package final class FullBacklog {
    package let port: Int
    private var fds: [Int32] = []

    package init() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) == 0 && getsockname(listener, $0, &length) == 0 }
        }
        guard bound, listen(listener, 0) == 0 else { throw HarnessError("bind/listen") }
        fds = [listener]
        for _ in 0..<3 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            _ = withUnsafePointer(to: &address) { p in p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, length) } }
            fds.append(fd)
        }
        usleep(50_000)
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { fds.forEach { close($0) } }
}

/// Waits until something listens on 127.0.0.1:port (per /proc/net/tcp, no probing
/// connection that would disturb the server: websocat cannot report the port it took).
package func waitForLoopbackListener(port: Int, timeout: Double = 15) -> Bool {
    let local = String(format: "0100007F:%04X", port)
    let deadline = monotonicSeconds() + timeout
    while monotonicSeconds() < deadline {
        if let table = try? String(contentsOfFile: "/proc/net/tcp", encoding: .utf8),
           table.split(separator: "\n").contains(where: { row in
               let fields = row.split(separator: " ")
               return fields.count > 3 && fields[1] == local && fields[3] == "0A"
           }) {
            return true
        }
        usleep(10_000)
    }
    return false
}

/// The bytes both ends of the loopback connection to `port` hold in the kernel: the
/// client's send queue (tx_queue) and the server's receive queue (rx_queue).
package func kernelHeldBytes(port: Int) -> Int {
    guard let table = procFile("/proc/net/tcp") else { return 0 }
    let hex = String(port, radix: 16, uppercase: true)
    let hexPort = ":" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    var total = 0
    for line in table.split(separator: "\n").dropFirst() {
        let fields = line.split(separator: " ")
        guard fields.count > 4, fields[3] == "01" else { continue }  // established
        let local = fields[1], remote = fields[2]
        let queues = fields[4].split(separator: ":")
        guard queues.count == 2, let tx = Int(queues[0], radix: 16), let rx = Int(queues[1], radix: 16) else { continue }
        if remote.hasSuffix(hexPort) { total += tx }  // ours: its peer is the server's port
        if local.hasSuffix(hexPort) { total += rx }   // the server's
    }
    return total
}

/// A /proc file's text (its size reads as 0, so read until the end).
package func procFile(_ path: String) -> String? {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = read(fd, &chunk, chunk.count)
        if n <= 0 { break }
        bytes += chunk[0..<n]
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// The largest send buffer the kernel gives a TCP socket (tcp_wmem's third value), 4 MiB
/// when it cannot be read.
package func largestSendBuffer() -> Int {
    procFile("/proc/sys/net/ipv4/tcp_wmem").flatMap { $0.split(whereSeparator: \.isWhitespace).last.flatMap { Int($0) } } ?? 4 << 20
}
