import Glibc
import XCTest
@testable import WebSocketTransport

/// An accepted stream keeps its peer as a socket address and words it when asked: the
/// words must be the ones the text used to be ("127.0.0.1:port", "[::1]:port").
final class AcceptedPeerTests: XCTestCase {
    func testAnAcceptedIPv4PeerIsWordedAsAddressAndPort() throws {
        try checkPeer(listenOn: "127.0.0.1", family: AF_INET, expected: { "127.0.0.1:\($0)" })
    }

    func testAnAcceptedIPv6PeerIsWordedInBrackets() throws {
        try checkPeer(listenOn: "::1", family: AF_INET6, expected: { "[::1]:\($0)" })
    }

    private func checkPeer(listenOn address: String, family: Int32, expected: (UInt16) -> String) throws {
        let listener = try TCPListener(address: address, port: 0)
        let client = socket(family, Int32(SOCK_STREAM.rawValue), 0)
        XCTAssertGreaterThanOrEqual(client, 0)
        defer { close(client) }
        var storage = sockaddr_storage()
        var length: socklen_t
        if family == AF_INET {
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = listener.port.bigEndian
            inet_pton(AF_INET, address, &sin.sin_addr)
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
            withUnsafeBytes(of: sin) { bytes in withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: bytes) } }
        } else {
            var sin6 = sockaddr_in6()
            sin6.sin6_family = sa_family_t(AF_INET6)
            sin6.sin6_port = listener.port.bigEndian
            inet_pton(AF_INET6, address, &sin6.sin6_addr)
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
            withUnsafeBytes(of: sin6) { bytes in withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: bytes) } }
        }
        let connected = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(client, $0, length) }
        }
        XCTAssertEqual(connected, 0)
        // The client's own port, as the server sees it.
        var local = sockaddr_storage()
        var localLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(client, $0, &localLength) }
        }
        let clientPort = withUnsafeBytes(of: local) { bytes in
            UInt16(bigEndian: bytes.loadUnaligned(fromByteOffset: 2, as: UInt16.self))
        }
        var accepted: TCPStream?
        for _ in 0..<100 {
            if case .accepted(let stream) = listener.accept() {
                accepted = stream
                break
            }
            usleep(10_000)
        }
        let stream = try XCTUnwrap(accepted)
        XCTAssertEqual(stream.remoteAddress, expected(clientPort))
        // Asked again after the descriptor is closed: the address is the stream's, not the socket's.
        stream.close()
        XCTAssertEqual(stream.remoteAddress, expected(clientPort))
    }
}
