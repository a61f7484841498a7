import Glibc
import XCTest
@testable import WSKit
import WebSocketTransport

/// The end of a connection whose handshake completed just as its connect was cancelled
/// (too narrow a moment to reach through a peer): the Close with the cancel's code goes
/// out, masked as a client's, then the stream ends.
final class ConnectAttemptTests: XCTestCase {
    func testAnAbandonedConnectionSendsTheCancelsCloseThenEnds() throws {
        var ends: [Int32] = [-1, -1]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends), 0)
        defer { close(ends[1]) }
        let attempt = ConnectAttempt()
        attempt.cancel(code: 4001, reason: "bye")
        attempt.cancel(code: 1000, reason: "later")  // the first cancel counts
        attempt.abandon(PairStream(ends[0]))

        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64)
        while true {
            let n = read(ends[1], &chunk, chunk.count)
            if n <= 0 { break }
            received += chunk[..<n]
        }
        XCTAssertEqual(received.count, 2 + 4 + 5, "a masked Close of 5 bytes, then the end: \(received)")
        guard received.count == 11 else { return }
        XCTAssertEqual(received[0], 0x88, "FIN and Close")
        XCTAssertEqual(received[1], 0x80 | 5, "masked, 5 bytes")
        let mask = Array(received[2..<6])
        let payload = received[6...].enumerated().map { $0.element ^ mask[$0.offset % 4] }
        XCTAssertEqual(payload, [0x0F, 0xA1] + Array("bye".utf8))
    }

    func testAnAttemptNotCancelledClosesWithoutAFrame() throws {
        var ends: [Int32] = [-1, -1]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends), 0)
        defer { close(ends[1]) }
        ConnectAttempt().abandon(PairStream(ends[0]))
        var byte: UInt8 = 0
        XCTAssertEqual(read(ends[1], &byte, 1), 0, "bytes came from a connection nobody cancelled")
    }
}

/// One end of a socket pair as a plain byte stream.
private final class PairStream: ByteStream {
    let fileDescriptor: Int32
    private var open = true
    init(_ fd: Int32) { fileDescriptor = fd }

    func read(into buffer: UnsafeMutableRawPointer, count: Int) -> IOResult {
        let n = Glibc.read(fileDescriptor, buffer, count)
        return n > 0 ? .done(n) : n == 0 ? .endOfStream : .failed(.system(errno: errno))
    }

    func write(_ vectors: UnsafePointer<iovec>, count: Int) -> IOResult {
        let n = writev(fileDescriptor, vectors, Int32(count))
        return n >= 0 ? .done(n) : .failed(.system(errno: errno))
    }

    var hasBufferedInput: Bool { false }
    var hasPendingOutput: Bool { false }
    func flush() -> IOResult { .done(0) }
    func shutdownOutput() { shutdown(fileDescriptor, Int32(SHUT_WR)) }

    func close() {
        guard open else { return }
        open = false
        Glibc.close(fileDescriptor)
    }
}
