import Foundation
import Glibc
import TestSupport
import WebSocketCore
import WebSocketExec
import XCTest

/// The same request and the same `env` script under websocketd (Debian package) and under
/// `CGIEnvironment` + `ExecBridge`: the same variables, name for name, with the documented
/// differences only.
final class WebsocketdEnvironmentTests: ExecTestCase {
    func testSameEnvironmentAsWebsocketd() throws {
        let websocketd = try Tool.websocketd.path()
        let envScript = try script("env")
        let port = try LoopbackSocket(listening: false).port
        let server = try TestSupport.ChildProcess(executable: websocketd,
                                                  arguments: ["--port", String(port), "--address", "127.0.0.1", envScript],
                                                  environment: ["PATH": "/usr/local/bin:/usr/bin:/bin", "NOT_PASSED": "x"])
        defer { server.kill() }
        let head = "GET /a%20b/c%C3%A9?x=1&y=%20 HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\n"
            + "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            + "X-Multi: one\r\nX-Multi: two\r\nX-Dash-Name:  v \r\nUser-Agent: envtest/1\r\nCookie: a=1; b=2\r\n"
            + "Proxy: http://evil.example/\r\n\r\n"
        let theirs = try websocketdEnvironment(port: port, request: head)

        var handshake = ServerHandshake()
        var index = 0
        let bytes = Array(head.utf8)
        let parsed = try bytes.withUnsafeBytes { try handshake.receive($0, &index) }
        let request = try XCTUnwrap(parsed)
        let facts = ConnectionFacts(remoteAddress: "127.0.0.1", remotePort: 40000, localAddress: "127.0.0.1", localPort: port,
                                    uniqueID: "1")
        let cgi = CGIEnvironment.variables(for: request, connection: facts, serverSoftware: "wspipe/test")
        let environment = CGIEnvironment.childEnvironment(cgi: cgi, passing: [], parent: { name in
            name == "PATH" ? "/usr/local/bin:/usr/bin:/bin" : nil
        })
        let rig = try rig(ChildCommand(program: envScript), environment: environment)
        XCTAssertTrue(spin { rig.log.ending != nil })
        let ours = parse(rig.log.messages.map(\.text))

        // Names: ours add HTTP_HOST (Go's server takes Host out of the header list) and
        // leave out HTTP_PROXY (httpoxy).
        XCTAssertEqual(Set(ours.keys).subtracting(theirs.keys), ["HTTP_HOST"])
        XCTAssertEqual(Set(theirs.keys).subtracting(ours.keys), ["HTTP_PROXY"])
        // Values: equal but for what is per server or per connection by nature, and the
        // gateway version (websocketd 0.4 says websocketd-CGI/0.1; later ones CGI/1.1).
        for (name, value) in theirs where !["SERVER_SOFTWARE", "UNIQUE_ID", "REMOTE_PORT", "GATEWAY_INTERFACE", "HTTP_PROXY"].contains(name) {
            XCTAssertEqual(ours[name], value, name)
        }
        XCTAssertEqual(ours["GATEWAY_INTERFACE"], "CGI/1.1")
        XCTAssertEqual(ours["SERVER_SOFTWARE"], "wspipe/test")
        XCTAssertEqual(ours["PATH_INFO"], "/a b/cé", "spot check: websocketd decodes the path too")
    }

    private func parse(_ lines: [String]) -> [String: String] {
        var result: [String: String] = [:]
        for line in lines {
            guard let equals = line.firstIndex(of: "=") else { continue }
            result[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        return result
    }

    /// Connects (retrying while websocketd starts), sends `request` raw, reads the 101 and
    /// every text frame until the connection ends.
    private func websocketdEnvironment(port: Int, request: String) throws -> [String: String] {
        var fd: Int32 = -1
        let deadline = Date().addingTimeInterval(5)
        while fd < 0 {
            let candidate = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(port).bigEndian
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(candidate, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
            }
            if connected { fd = candidate; break }
            close(candidate)
            guard Date() < deadline else { throw HarnessError("websocketd did not start on port \(port)") }
            usleep(50_000)
        }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        _ = Array(request.utf8).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            received += chunk[0..<n]
        }
        guard let headEnd = received.firstRange(of: Array("\r\n\r\n".utf8))?.upperBound,
              String(decoding: received[..<headEnd], as: UTF8.self).hasPrefix("HTTP/1.1 101") else {
            throw HarnessError("websocketd answered: \(String(decoding: received.prefix(300), as: UTF8.self))")
        }
        var lines: [String] = []
        var at = headEnd
        while at + 2 <= received.count {
            let opcode = received[at] & 0x0F
            var length = Int(received[at + 1] & 0x7F)
            at += 2
            if length == 126 { length = Int(received[at]) << 8 | Int(received[at + 1]); at += 2 }
            else if length == 127 { throw HarnessError("unexpected 64-bit frame") }
            guard at + length <= received.count else { break }
            if opcode == 1 { lines.append(String(decoding: received[at..<(at + length)], as: UTF8.self)) }
            at += length
        }
        return parse(lines)
    }
}
