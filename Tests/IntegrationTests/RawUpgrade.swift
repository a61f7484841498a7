// A raw WebSocket upgrade request over a socket, for the status of refusals a client
// library would not send (hostile paths, chosen Origin and Host headers).
import Glibc
import TestSupport

extension IntegrationTestCase {
    /// The status line's code of a raw upgrade request for `target` (bytes as given), `host`
    /// in its Host header, with `headers` ("Name: value\r\n" lines) added.
    func upgradeStatus(_ port: Int, _ target: [UInt8], host: String = "127.0.0.1", headers: String = "") throws -> Int? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        guard connectLoopback(fd, port) == 0 else { throw HarnessError("connect failed: \(errno)") }
        let request = Array("GET ".utf8) + target + Array((" HTTP/1.1\r\nHost: \(host)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\(headers)\r\n").utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !answer.contains(10) {
            let count = recv(fd, &buffer, buffer.count, 0)
            guard count > 0 else { break }
            answer += buffer[..<count]
        }
        let line = String(decoding: answer.prefix { $0 != 13 }, as: UTF8.self)
        return line.split(separator: " ").dropFirst().first.flatMap { Int($0) }
    }
}

extension IntegrationTestCase {
    /// A client that completes a WebSocket upgrade with a 4 KiB receive buffer and then
    /// never reads. The caller closes the descriptor.
    func stalledClient(_ port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var small: Int32 = 4096
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        guard connectLoopback(fd, port) == 0 else { close(fd); throw HarnessError("connect failed: \(errno)") }
        let request = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        _ = Array(request.utf8).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        // The 101's head, byte by byte: nothing after it is taken from the socket.
        var head: [UInt8] = []
        var byte: UInt8 = 0
        while !head.suffix(4).elementsEqual([13, 10, 13, 10]), recv(fd, &byte, 1, 0) == 1 { head.append(byte) }
        guard head.starts(with: Array("HTTP/1.1 101".utf8)) else {
            close(fd)
            throw HarnessError("no 101: \(String(decoding: head, as: UTF8.self))")
        }
        return fd
    }
}

/// Connects `fd` to 127.0.0.1:`port` with a 10 s receive timeout; connect(2)'s result.
private func connectLoopback(_ fd: Int32, _ port: Int) -> Int32 {
    var timeout = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
}
