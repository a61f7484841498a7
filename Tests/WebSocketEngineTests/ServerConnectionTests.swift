import EngineTestSupport
import Glibc
import WebSocketCore
@testable import WebSocketEngine
import WebSocketTransport
import XCTest

/// Between a client's driver and its mode's handler: without per-client limits the driver
/// calls the handler itself and the server's connection hears only the ending; with them
/// the connection is the driver's delegate and applies them. Either way the handler gets
/// every event and the metrics count what the client sent.
final class ServerConnectionTests: XCTestCase {
    /// One handler for every client.
    private final class RecordingMode: ServerMode {
        let recorder = Recorder()
        func handler(for connection: ServerConnection) -> ConnectionDelegate { recorder }
    }

    private typealias Pair = HandedOverClient<RecordingMode>

    private func handedOver(limited: Bool) throws -> Pair {
        var configuration = ServerConfiguration()
        if limited { configuration.perClient.idleTimeout = 60 }
        return try Pair(configuration: configuration, mode: RecordingMode())
    }

    private func frame(_ opcode: UInt8, fin: Bool = true, _ payload: [UInt8]) -> [UInt8] { Pair.frame(opcode, fin: fin, payload) }

    func testWithoutLimitsTheDriverCallsTheHandlerItself() throws {
        let pair = try handedOver(limited: false)
        defer { close(pair.client) }
        let driver = try XCTUnwrap(pair.connection.activeDriver)
        XCTAssertTrue(driver.delegate === pair.mode.recorder)
        XCTAssertTrue(driver.endObserver === pair.connection)
    }

    func testWithLimitsTheConnectionStandsBetween() throws {
        let pair = try handedOver(limited: true)
        defer { close(pair.client) }
        let driver = try XCTUnwrap(pair.connection.activeDriver)
        XCTAssertTrue(driver.delegate === pair.connection)
        XCTAssertNil(driver.endObserver)
    }

    /// A program's client (--exec) that leaves while its messages wait for a child that does
    /// not read: the handler must hear of it, or the child runs on (the connection once
    /// dropped this event between the driver and the handler).
    func testAHangUpWhileReadingIsPausedReachesTheHandler() throws {
        for limited in [false, true] {
            let pair = try handedOver(limited: limited)
            pair.send(frame(0x1, Array("hello".utf8)))
            pair.run { _ in pair.mode.recorder.messages.count == 1 }
            try XCTUnwrap(pair.connection.activeDriver).pauseReading()
            close(pair.client)
            pair.run { _ in pair.mode.recorder.shutDownsWhilePaused > 0 }
            XCTAssertEqual(pair.mode.recorder.shutDownsWhilePaused, 1, "limited: \(limited)")
            pair.connection.activeDriver?.abandon()
        }
    }

    func testTheMetricsCountWhatTheClientSentWhileConnectedAndAfter() throws {
        for limited in [false, true] {
            let pair = try handedOver(limited: limited)
            var ended = false
            pair.server.onEvent = { if case .disconnected = $0 { ended = true } }
            pair.send(frame(0x1, Array("hello".utf8)) + frame(0x2, fin: false, [1, 2, 3]) + frame(0x0, [4]))
            pair.send(frame(0x9, Array("ping".utf8)) + frame(0x1, fin: false, Array("par".utf8)))
            pair.run { _ in pair.connection.activeDriver?.core.isReceivingMessage == true }
            // Two whole messages; the third is under way with 3 bytes so far. Pings are not data.
            XCTAssertEqual(pair.connection.messagesReceived, 2, "limited: \(limited)")
            XCTAssertEqual(pair.connection.bytesReceived, 12, "limited: \(limited)")
            XCTAssertEqual(pair.server.totals.messagesReceived, 2)
            XCTAssertEqual(pair.server.totals.bytesReceived, 12)
            pair.send(frame(0x0, Array("t".utf8)) + frame(0x8, [0x03, 0xE8]))
            shutdown(pair.client, Int32(SHUT_WR))
            pair.run { _ in ended }
            XCTAssertTrue(ended, "limited: \(limited)")
            XCTAssertNil(pair.connection.activeDriver)
            XCTAssertEqual(pair.server.totals.messagesReceived, 3, "limited: \(limited)")
            XCTAssertEqual(pair.server.totals.bytesReceived, 13, "limited: \(limited)")
            XCTAssertEqual(pair.mode.recorder.messages.map(\.bytes.count), [5, 4, 4])
            close(pair.client)
        }
    }
}
