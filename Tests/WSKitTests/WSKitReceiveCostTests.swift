import Glibc
import XCTest
import TestSupport
import WSKit

/// What receiving costs beyond the message itself (docs/PERFORMANCE.md, "WSKit download:
/// the engine's heap keeps its pages").
final class WSKitReceiveCostTests: XCTestCase {
    /// A 64 KiB message's array is allocated on the engine thread and freed by the consumer.
    /// With glibc's start thresholds the engine thread's heap gave its pages back whenever
    /// the consumer caught up and faulted them in again for the next messages (about 7 page
    /// faults per message); now only the heap's growth faults (a few hundred pages, once).
    /// (glibc's thresholds are the process's: run on its own, as `--filter` does, this fails
    /// without the engine raising them; after a test that freed a 2 MiB message it would not.)
    func testReceivedArraysDoNotFaultInFreshPagesEachTime() async throws {
        let server = try await WebSocketServer.bind(to: "127.0.0.1:0")
        let port = try XCTUnwrap(server.port)
        let count = 2048
        let serving = Task { () throws -> Void in
            var pending = server.makeAsyncIterator()
            guard let client = await pending.next() else { return }
            let ws = try await client.accept()
            let payload = [UInt8](repeating: 0x5A, count: 65536)
            for _ in 0..<count { try await ws.send(.binary(payload)) }
            try await ws.close()
        }
        let ws = try await WebSocket.connect(to: "ws://127.0.0.1:\(port)/")
        let (received, faults) = try await withTimeout(60, "\(count) messages of 64 KiB") { () -> (Int, Int) in
            let start = minorFaults()
            var received = 0
            for try await message in ws.messages {
                if case .binary(let bytes) = message { received += bytes.count }
            }
            return (received, minorFaults() - start)
        }
        try await serving.value
        await server.close()
        XCTAssertEqual(received, count * 65536)
        XCTAssertLessThan(faults, count, "page faults while receiving \(count) messages of 64 KiB")
    }
}

/// The process's minor page faults so far.
private func minorFaults() -> Int {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return usage.ru_minflt
}
