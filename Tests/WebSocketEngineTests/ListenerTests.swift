// The listener's pauses: one for exhaustion (EMFILE) ends by itself after `retryDelay`,
// one its owner asked for lasts until the owner resumes, whichever came first.
import EngineTestSupport
import Glibc
import WebSocketEngine
import WebSocketTransport
import XCTest

final class ListenerTests: XCTestCase {
    /// A listening socket whose descriptor is always readable (a pipe holding a byte) and
    /// whose accepts give what the test scripted, then "would block".
    final class ScriptedSocket: ListeningSocket {
        let fileDescriptor: Int32
        private let writeEnd: Int32
        var script: [AcceptResult] = []
        private(set) var accepts = 0
        init() {
            var ends: [Int32] = [-1, -1]
            _ = pipe(&ends)
            fileDescriptor = ends[0]
            writeEnd = ends[1]
            var byte: UInt8 = 1
            _ = write(writeEnd, &byte, 1)
        }
        var localAddress: String { "scripted" }
        func accept() -> AcceptResult {
            accepts += 1
            return script.isEmpty ? .wouldBlock : script.removeFirst()
        }
        func close() {
            Glibc.close(fileDescriptor)
            Glibc.close(writeEnd)
        }
    }

    /// A started listener whose first accept finds no descriptor (a 50 ms pause follows).
    private func exhaustedListener(_ loop: EventLoop, _ socket: ScriptedSocket) -> Listener {
        socket.script = [.exhausted(errno: EMFILE)]
        let listener = Listener(loop: loop, socket: socket) { _ in }
        listener.retryDelay = 0.05
        listener.start()
        XCTAssertTrue(loop.spin(2) { listener.exhaustedCount == 1 })
        return listener
    }

    func testAnExhaustionRetryDoesNotEndAPauseTheOwnerAskedFor() throws {
        let loop = try EventLoop()
        let socket = ScriptedSocket()
        let listener = exhaustedListener(loop, socket)
        // The owner pauses (say, a connection waits for a descriptor) before the retry.
        listener.pause()
        _ = loop.spin(0.3) { false }
        XCTAssertFalse(listener.isAccepting, "the exhaustion retry resumed a listener its owner had paused")
        let accepts = socket.accepts
        listener.resume()
        XCTAssertTrue(loop.spin(2) { socket.accepts > accepts })
        XCTAssertTrue(listener.isAccepting)
        listener.close()
    }

    func testAnExhaustionPauseEndsByItselfAfterTheRetryDelay() throws {
        let loop = try EventLoop()
        let socket = ScriptedSocket()
        let listener = exhaustedListener(loop, socket)
        XCTAssertFalse(listener.isAccepting)
        let accepts = socket.accepts
        XCTAssertTrue(loop.spin(2) { socket.accepts > accepts })
        XCTAssertTrue(listener.isAccepting)
        listener.close()
    }
}
